"""A GGUF file's natively loaded matrices as the kernels lay them out, kept on disk after the
first load, so that the next load of the file (a model swapped back in by a server of several
models, a restart) maps them instead of repacking every matrix: seconds for SmolLM2."""

from __future__ import annotations

import logging
import os
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import torch

from llmkit.model.demo import default_cache_dir
from llmkit.model.gguf.cache import cache_key
from llmkit.model.layers import q8, w4a8

logger = logging.getLogger(__name__)

# Bumped whenever a kernel's layout changes, so that no stale layout is ever mapped.
_FORMAT_VERSION = 1
Packed = w4a8.Packed | q8.Packed
_KINDS: dict[str, type[w4a8.Packed] | type[q8.Packed]] = {"w4a8": w4a8.Packed, "q8": q8.Packed}


class PackedCache:
    """``get(name, make)``: the packed matrix ``name`` from the file's cache, or ``make()``'s,
    remembered; ``save()`` writes what was made (once per file and layout version)."""

    def __init__(self, gguf: Path, cache_dir: Path | None = None):
        folder = (cache_dir or default_cache_dir()) / "gguf-packed"
        path = gguf.resolve()
        # The modification time too: a file rewritten in place with other weights of the same
        # size and metadata (another fine-tune) must not be served from the old one's cache.
        key = f"{cache_key(path)}-{path.stat().st_mtime_ns}-v{_FORMAT_VERSION}"
        self.path = folder / f"{key}.pt"
        self._stored = self._read()
        self._made: dict[str, tuple[str, tuple[torch.Tensor, ...]]] = {}

    def _read(self) -> dict[str, tuple[str, tuple[torch.Tensor, ...]]]:
        if not self.path.is_file():
            return {}
        try:
            # Mapped, not read: the pages come from the file as the kernels first touch them.
            return torch.load(self.path, mmap=True, weights_only=True)
        except (OSError, RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
            logger.warning("ignoring the packed-weight cache %s: %s", self.path, exc)
            return {}

    def get(self, name: str, make: Callable[[], Packed]) -> Packed:
        stored = self._stored.get(name)
        if stored is not None:
            kind, tensors = stored
            return _KINDS[kind](*tensors)
        packed = make()
        kind = "w4a8" if isinstance(packed, w4a8.Packed) else "q8"
        self._made[name] = (kind, tuple(packed))
        return packed

    def save(self) -> None:
        if not self._made:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            torch.save({**self._stored, **self._made}, partial)
            os.replace(partial, self.path)  # whole or not at all, for a reader beside us
        except OSError as exc:  # a read-only home: every load packs again
            logger.warning("cannot keep the packed weights in %s: %s", self.path, exc)
