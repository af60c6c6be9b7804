"""Option classes as flags: each field declared with ``option()`` (llmkit.config.option)
is one flag, generated here, and :func:`from_flags` builds the objects back from them.

A field whose default is an option class (``field(default_factory=HTTPOptions)``) is that
class's flags; the flags of every class go into the ``--help`` sections their ``group``
keys name.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from llmkit.cli.flags import base_type, flag_name
from llmkit.config.option import Flag

Options = TypeVar("Options")


def flag_fields(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Any]]:
    """Each field of ``cls`` (and of the option classes in it) that has a flag, with its
    type annotation."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        nested = _nested(field)
        if nested is not None:
            yield from flag_fields(nested)
        elif "flag" in field.metadata:
            yield field, hints[field.name]


def flag_of(field: dataclasses.Field[Any]) -> str:
    spec: Flag = field.metadata["flag"]
    return spec.name or flag_name(field.name)


def dest_of(field: dataclasses.Field[Any]) -> str:
    """The attribute argparse gives the flag's value."""
    return flag_of(field).removeprefix("--").replace("-", "_")


def add_option_flags(
    parser: argparse.ArgumentParser, groups: Mapping[str, str], *classes: type
) -> None:
    """The flags of ``classes``, in the sections ``groups`` titles (in its order)."""
    sections = {key: parser.add_argument_group(title) for key, title in groups.items()}
    for cls in classes:
        for field, hint in flag_fields(cls):
            group = field.metadata["flag"].group
            target = parser if group is None else sections[group]
            target.add_argument(flag_of(field), **_argument(field, hint))


def _argument(field: dataclasses.Field[Any], hint: Any) -> dict[str, Any]:
    """add_argument's settings: the type and choices read from the annotation, unless the
    flag parses its own text; a flag left out has the field's default."""
    spec: Flag = field.metadata["flag"]
    how: dict[str, Any] = {"help": field.metadata["help"]}
    kind = base_type(hint)
    if typing.get_origin(kind) is Literal:
        how["choices"] = typing.get_args(kind)
        kind = type(how["choices"][0])
    elif typing.get_origin(kind) in (tuple, list, Sequence):
        kind = typing.get_args(kind)[0]
    if kind is bool:
        how["action"] = "store_true"
        return how
    if spec.parse is None and kind is not str:
        how["type"] = kind
    for name in ("metavar", "nargs", "action"):
        if getattr(spec, name) is not None:
            how[name] = getattr(spec, name)
    default: Any = field.default
    if spec.action != "append":  # appended to: a list of its own, or None
        how["default"] = list(default) if spec.nargs else default
    return how


def from_flags(cls: type[Options], args: argparse.Namespace, **given: Any) -> Options:
    """The ``cls`` object the flags describe, with the fields in ``given`` as given; a bad
    value ends the command naming its flag."""
    values = dict(given)
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in given:
            continue
        nested = _nested(field)
        if nested is not None:
            values[field.name] = from_flags(nested, args)
        elif "flag" in field.metadata:
            value = _value(field, args)
            if value is not None:
                values[field.name] = value
    try:
        return cls(**values)
    except ValueError as exc:
        raise SystemExit(f"llmkit: error: {_with_flags(cls, str(exc))}") from None


def _value(field: dataclasses.Field[Any], args: argparse.Namespace) -> Any:
    value = getattr(args, dest_of(field))
    parse = field.metadata["flag"].parse
    if value is not None and parse is not None:
        try:
            value = parse(value)
        except ValueError as exc:
            # A message that begins with the field's name gets the flag there, any other
            # the flag before it.
            message, named = re.subn(rf"^{field.name}(?![\w-])", flag_of(field), str(exc))
            prefix = "" if named else f"{flag_of(field)}: "
            raise SystemExit(f"llmkit: error: {prefix}{message}") from None
    return tuple(value) if isinstance(value, list) else value


def _with_flags(cls: type, message: str) -> str:
    """An option class's message about its fields, naming their flags instead."""
    for field in dataclasses.fields(cls):
        if "flag" in field.metadata:
            pattern = rf"(?<![\w-]){re.escape(field.name)}(?![\w-])"
            message = re.sub(pattern, flag_of(field), message)
    return message


def _nested(field: dataclasses.Field[Any]) -> type | None:
    """The option class a field holds, when its default is one."""
    factory = field.default_factory
    return factory if isinstance(factory, type) and dataclasses.is_dataclass(factory) else None
