"""Shared flags: EngineConfig's fields, generated from the dataclass, and sampling."""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from typing import Any

from llmkit.config import EngineConfig
from llmkit.model.names import resolve_model
from llmkit.sampling_params import RequestOutputKind, SamplingParams

# The only place llmkit reads an environment variable for a setting (see DESIGN.md).
API_KEY_ENV = "LLMKIT_API_KEY"


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def base_type(hint: Any) -> Any:
    """``int | None`` -> int."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0]
    return hint


def _help(field: dataclasses.Field[Any], default: Any) -> str:
    """The field's own documentation, and its default where the text does not give it."""
    text = field.metadata["help"]
    return text if default is None else f"{text} (default: {default})"


def add_engine_flags(parser: argparse.ArgumentParser, **defaults: Any) -> None:
    """One flag per EngineConfig field but ``model``; unset flags keep the field's default,
    or the command's own in ``defaults``."""
    group = parser.add_argument_group("engine", "EngineConfig fields (see llmkit.EngineConfig)")
    hints = typing.get_type_hints(EngineConfig)
    for field in dataclasses.fields(EngineConfig):
        if field.name == "model":
            continue
        kind = base_type(hints[field.name])
        how: dict[str, Any] = {
            "default": defaults.get(field.name, argparse.SUPPRESS),
            "help": _help(field, defaults.get(field.name, field.default)),
        }
        if typing.get_origin(kind) is dict:
            group.add_argument(flag_name(field.name), type=_json_object, metavar="JSON", **how)
        elif kind is bool:
            group.add_argument(flag_name(field.name), action=argparse.BooleanOptionalAction, **how)
        else:
            flag, metavar = flag_name(field.name), kind.__name__.upper()
            group.add_argument(flag, type=kind, metavar=metavar, **how)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The EngineConfig fields given on the command line."""
    names = {f.name for f in dataclasses.fields(EngineConfig)} - {"model"}
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def engine_config(model: str, args: argparse.Namespace) -> EngineConfig:
    """The config the flags describe; a bad value, or a model that is not a model
    directory, ends the command with its message before anything loads."""
    try:
        config = EngineConfig.from_kwargs(model, **engine_kwargs(args))
        resolve_model(model)  # a GGUF file's folder is built here, once
    except (TypeError, ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"llmkit: error: {exc}") from None
    return config


def to_flags(kwargs: dict[str, Any]) -> list[str]:
    """The inverse of parsing: fields back to flags, for starting ``llmkit serve``."""
    flags = []
    for name, value in sorted(kwargs.items()):
        if isinstance(value, bool):
            flags.append(flag_name(name) if value else "--no-" + name.replace("_", "-"))
        elif isinstance(value, dict):
            flags += [flag_name(name), json.dumps(value)]
        elif value is not None:
            flags += [flag_name(name), str(value)]
    return flags


def add_sampling_flags(parser: argparse.ArgumentParser, max_tokens: int) -> None:
    """The sampling settings of the requests ``run`` and ``chat`` send."""
    group = parser.add_argument_group("sampling")
    group.add_argument(
        "--max-tokens",
        type=int,
        default=max_tokens,
        help=f"the most tokens to generate per reply (default: {max_tokens})",
    )
    group.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="the sampling temperature; 0 is greedy (default: 0.7)",
    )
    group.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        help="nucleus sampling: keep the most likely tokens up to this probability (default: 1.0)",
    )
    group.add_argument(
        "--sampling-seed",
        type=int,
        help="the request's sampling seed, for reproducible samples (default: none)",
    )


def sampling_params(args: argparse.Namespace) -> SamplingParams:
    """The sampling flags as streaming (``DELTA``) SamplingParams."""
    return SamplingParams(
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.sampling_seed,
        output_kind=RequestOutputKind.DELTA,
    )
