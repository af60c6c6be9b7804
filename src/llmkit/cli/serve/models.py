"""``llmkit serve``'s several-models flags: ``--model NAME=PATH``, a TOML models file,
``--models-dir``, and the manager's keep-alive, count and memory limits."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from llmkit.cli.flags import engine_kwargs
from llmkit.config import EngineConfig
from llmkit.manager.keep_alive import parse_keep_alive
from llmkit.manager.manager import ModelManager
from llmkit.manager.settings import ModelSettings
from llmkit.model.names import DEMO_MODEL_NAME, INSTALLED_GGUF

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

_GIB = 1 << 30


def add_models_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "several models", "serve many named models, each loaded on its first request"
    )
    group.add_argument(
        "--model",
        dest="models",
        action="append",
        metavar="NAME=PATH",
        help="a model clients name NAME (a directory, a GGUF file, 'smollm2'); repeatable; "
        "the engine flags apply to every one",
    )
    group.add_argument(
        "--models-file",
        metavar="TOML",
        help="a [defaults] table and one table per model: model = PATH, any EngineConfig "
        "field, pin = true, keep_alive = '10m'",
    )
    group.add_argument(
        "--models-dir",
        metavar="DIR",
        help="serve every GGUF file and model folder in DIR, named by file stem or folder",
    )
    group.add_argument(
        "--keep-alive",
        default="5m",
        help="how long a model stays loaded after its last request: a duration ('5m', "
        "'1h30m'), seconds, 0 to unload at once, negative to keep it (default: 5m)",
    )
    group.add_argument(
        "--max-loaded-models", type=int, help="the most models loaded at once (default: no limit)"
    )
    group.add_argument(
        "--models-memory-gib",
        type=float,
        help="the memory the loaded models may take (default: the memory available at start)",
    )


def model_manager(args: argparse.Namespace) -> ModelManager | None:
    """The manager the flags describe, or None for the single-model form; a bad flag, file
    or path ends the command naming it, before anything loads (a model whose file is
    broken is found at its first request, and fails only that model's requests)."""
    if not (args.models or args.models_file or args.models_dir):
        return None
    if args.served_model_name:
        raise SystemExit(
            "llmkit serve: error: --served-model-name names the one model; with several, "
            "--model NAME=PATH names each"
        )
    if args.model or args.engine_socket:
        raise SystemExit(
            "llmkit serve: error: give either MODEL (or --engine-socket) or several models "
            "(--model NAME=PATH, --models-file, --models-dir), not both"
        )
    defaults = engine_kwargs(args)
    try:
        settings = _from_dir(args.models_dir, defaults) if args.models_dir else []
        settings += _from_file(Path(args.models_file), defaults) if args.models_file else []
        settings += [_named(item, defaults) for item in args.models or []]
        keep = parse_keep_alive(args.keep_alive)
        memory = None if args.models_memory_gib is None else int(args.models_memory_gib * _GIB)
        return ModelManager(
            settings,
            keep_alive_s=keep,
            max_loaded_models=args.max_loaded_models,
            memory_bytes=memory,
        )
    except (TypeError, ValueError, OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"llmkit serve: error: {exc}") from None


def _named(item: str, defaults: dict[str, Any]) -> ModelSettings:
    name, sep, model = item.partition("=")
    if not sep or not name or not model:
        raise ValueError(f"--model: expected NAME=PATH, got {item!r}")
    return _settings(name, {**defaults, "model": model})


def _from_file(path: Path, defaults: dict[str, Any]) -> list[ModelSettings]:
    tables = tomllib.loads(path.read_text())
    common = {**defaults, **_fields(tables.pop("defaults", {}))}
    out = []
    for name, table in tables.items():
        if not isinstance(table, dict) or "model" not in table:
            raise ValueError(f"{path}: [{name}] needs model = PATH")
        out.append(_settings(name, {**common, **_fields(table)}))
    return out


def _from_dir(directory: str, defaults: dict[str, Any]) -> list[ModelSettings]:
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"--models-dir: {directory!r} is not a directory")
    found = sorted(
        p for p in root.iterdir() if p.suffix.lower() == ".gguf" or (p / "config.json").is_file()
    )
    if not found:
        raise ValueError(f"--models-dir: {directory!r} holds no GGUF file or model folder")
    name = lambda p: p.stem if p.is_file() else p.name  # noqa: E731
    return [_settings(name(p), {**defaults, "model": str(p)}) for p in found]


def _fields(table: dict[str, Any]) -> dict[str, Any]:
    """A table's keys as EngineConfig spells them (flags' dashes become underscores)."""
    return {key.replace("-", "_"): value for key, value in table.items()}


def _settings(name: str, fields: dict[str, Any]) -> ModelSettings:
    model = fields.pop("model")
    pin = bool(fields.pop("pin", False))
    keep = fields.pop("keep_alive", None)
    if model not in INSTALLED_GGUF and model != DEMO_MODEL_NAME and not Path(model).exists():
        raise ValueError(f"model {name!r}: no file or directory at {model!r}")
    try:
        config = EngineConfig.from_kwargs(model, **fields)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"model {name!r}: {exc}") from None
    if keep is not None:
        parse_keep_alive(keep)  # a bad value stops the start, naming keep_alive
    return ModelSettings(name, config, pin=pin, keep_alive=keep)
