"""How much memory a model takes once loaded, estimated before loading it."""

from __future__ import annotations

from pathlib import Path

from llmkit.config import EngineConfig
from llmkit.model.names import INSTALLED_GGUF, installed_gguf

_GIB = 1 << 30
# Weight files a HuggingFace folder loads from; the tokenizer and config are small.
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def estimate_bytes(config: EngineConfig) -> int:
    """A model's resident bytes: its weight files (a GGUF file loads as quantized as it is
    stored) and, on CPU, the KV cache it allocates up front."""
    return _weight_bytes(config.model) + int(config.cpu_kv_cache_gib * _GIB)


def _weight_bytes(model: str) -> int:
    if model in INSTALLED_GGUF:
        return installed_gguf(model).stat().st_size
    path = Path(model)
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir() if p.name.endswith(_WEIGHT_SUFFIXES))
    return 0  # "demo", built on first load: a few MB
