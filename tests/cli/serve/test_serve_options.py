"""serve's options are declared once: every field of the app's and the process's option
classes is a flag, and each flag's value comes back in its field."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any, Literal

import pytest

from llmkit.cli import build_parser
from llmkit.cli.flags import base_type
from llmkit.cli.options import dest_of, flag_fields, flag_of, from_flags
from llmkit.cli.serve.server_flags import GROUPS, ProcessOptions
from llmkit.http import AppOptions, ServingOptions
from llmkit.lora_request import LoRARequest

CLASSES = (AppOptions, ProcessOptions)
# Settings for apps only, on purpose: the server keeps their defaults.
WITHOUT_FLAG = {
    (ServingOptions, "media_fetch_timeout_s"),
    (ServingOptions, "max_media_bytes"),
}
# Values that the flags' own checks take (an installed plugin, an importable object).
VALUES = {
    "tool_call_parser": "hermes",
    "reasoning_parser": "qwen3",
    "chat_template": "chatml",
    "middleware": "json:loads",
    "lora_modules": "a=/adapters/a",
    "allowed_origins": "https://a.example,https://b.example",
}


def leaves(cls: type, value: Any = None) -> Iterator[tuple[type, dataclasses.Field[Any], Any]]:
    """Each field of an option class, and of the option classes in it, with its value in
    ``value`` (an object of ``cls``) when given."""
    for field in dataclasses.fields(cls):
        inner = None if value is None else getattr(value, field.name)
        factory = field.default_factory
        if isinstance(factory, type) and dataclasses.is_dataclass(factory):
            yield from leaves(factory, inner)
        else:
            yield cls, field, inner


def test_every_field_has_a_flag_in_a_section_of_help():
    fields = [(owner, field) for cls in CLASSES for owner, field, _ in leaves(cls)]
    missing = {(owner, f.name) for owner, f in fields if "flag" not in f.metadata}
    assert missing == WITHOUT_FLAG
    flags = [flag_of(f) for owner, f in fields if "flag" in f.metadata]
    assert len(flags) == len(set(flags)) == len(fields) - len(WITHOUT_FLAG)
    for cls in CLASSES:
        for field, _ in flag_fields(cls):
            assert field.metadata["help"].strip()
            assert field.metadata["flag"].group in (None, *GROUPS)
    serve = dict(_subcommands())["serve"]
    options = {option for action in serve._actions for option in action.option_strings}
    assert set(flags) <= options


def _subcommands() -> Iterator[tuple[str, Any]]:
    for action in build_parser()._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            yield from action.choices.items()


def _argv(field: dataclasses.Field[Any], hint: Any, tmp_path: Any) -> list[str]:
    """The flag set to a value that is not its default."""
    kind = base_type(hint)
    if field.name == "allowed_local_media_path":
        return [flag_of(field), str(tmp_path)]
    if field.name in VALUES:
        return [flag_of(field), VALUES[field.name]]
    if kind is bool:
        return [flag_of(field)]
    if typing.get_origin(kind) is Literal:
        choice = next(c for c in reversed(typing.get_args(kind)) if c != field.default)
        return [flag_of(field), str(choice)]
    return [flag_of(field), {int: "7", float: "2.5"}.get(kind, "text")]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_each_flag_sets_its_field(cls, tmp_path):
    parser = build_parser()
    given = [_argv(field, hint, tmp_path) for field, hint in flag_fields(cls)]
    args = parser.parse_args(["serve", "demo", *(arg for flag in given for arg in flag)])
    default = from_flags(cls, parser.parse_args(["serve", "demo"]))
    built = from_flags(cls, args)
    pairs = zip(leaves(cls, built), leaves(cls, default))
    for (owner, field, value), (_, _, unset) in pairs:
        if "flag" not in field.metadata:
            continue
        assert value != unset, f"{flag_of(field)} did not reach {owner.__name__}.{field.name}"
        raw = getattr(args, dest_of(field))
        parse = field.metadata["flag"].parse
        expected = raw if parse is None else parse(raw)
        assert value == (tuple(expected) if isinstance(expected, list) else expected)


def test_a_flag_left_out_keeps_the_fields_default_but_the_page_is_on():
    args = build_parser().parse_args(["serve", "demo"])
    assert from_flags(AppOptions, args) == AppOptions(ui=True)
    assert from_flags(ProcessOptions, args) == ProcessOptions()


def test_values_come_back_typed():
    loras = ["--lora-modules", "a=/x", '{"name": "b", "path": "/y"}']
    methods = ["--allowed-methods", "GET, POST", "--allowed-methods", "PUT"]
    args = build_parser().parse_args(["serve", "demo", *loras, *methods, "--ws-max-requests", "3"])
    options = from_flags(AppOptions, args)
    assert options.lora_modules == (LoRARequest("a", 1, "/x"), LoRARequest("b", 2, "/y"))
    assert options.access.allowed_methods == ("GET", "POST", "PUT")
    assert options.websocket.max_requests_per_connection == 3
