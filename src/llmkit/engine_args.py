"""EngineConfig's fields as command-line flags, generated from the dataclass."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any

from llmkit.config import EngineConfig


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _base_type(hint: Any) -> Any:
    """``int | None`` -> int."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0]
    return hint


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per EngineConfig field but ``model``; unset flags keep the field's default."""
    group = parser.add_argument_group("engine", "EngineConfig fields (see llmkit.EngineConfig)")
    hints = typing.get_type_hints(EngineConfig)
    for field in dataclasses.fields(EngineConfig):
        if field.name == "model":
            continue
        kind = _base_type(hints[field.name])
        help_text = f"default: {field.default}"
        if kind is bool:
            group.add_argument(
                _flag(field.name), action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS, help=help_text,
            )
        else:
            group.add_argument(
                _flag(field.name), type=kind, default=argparse.SUPPRESS,
                metavar=kind.__name__.upper(), help=help_text,
            )


def engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The EngineConfig fields given on the command line."""
    names = {f.name for f in dataclasses.fields(EngineConfig)} - {"model"}
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def engine_config(model: str, args: argparse.Namespace) -> EngineConfig:
    """The config the flags describe; a bad value ends the command with its message."""
    try:
        return EngineConfig.from_kwargs(model, **engine_kwargs(args))
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"llmkit: error: {exc}") from None


def to_flags(kwargs: dict[str, Any]) -> list[str]:
    """The inverse of parsing: fields back to flags, for starting ``llmkit serve``."""
    flags = []
    for name, value in sorted(kwargs.items()):
        if isinstance(value, bool):
            flags.append(_flag(name) if value else "--no-" + name.replace("_", "-"))
        elif value is not None:
            flags += [_flag(name), str(value)]
    return flags
