"""A GGUF file's native tensors as their kernels read them, kept beside its cached folder.

Laying a file's blocks out for the kernels costs seconds (SmolLM2's 211 tensors ~2 s, a
1B-class file's ~10 s in torch, ~4 s in C); the first load saves the result (``packed-N-MTIME.pt``:
the layouts' version, the file's modification time) and a later load maps it from disk
instead, reading pages as they are touched. A store that cannot be written (a read-only or
full disk) only costs the next load that time.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zipfile import BadZipFile

import torch

from llmkit.model.layers.weights.registry import Packed, WeightFormat

logger = logging.getLogger(__name__)

VERSION = 1  # the kernels' layouts: a change to one must bump it


class PackedStore:
    """Packed weights by tensor name, found in ``folder``'s store or made and kept for it."""

    def __init__(self, folder: Path | None, file: Path) -> None:
        # The file's modification time too: a file rewritten in place with other weights of
        # the same size and metadata (another fine-tune) is packed again, not served stale.
        name = f"packed-{VERSION}-{file.stat().st_mtime_ns}.pt"
        self.path = None if folder is None else folder / name
        self.found: dict[str, list[Any]] = {}
        self.made: dict[str, list[Any]] = {}
        if self.path is not None and self.path.is_file():
            try:
                self.found = torch.load(self.path, mmap=True, weights_only=True)
            except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, BadZipFile) as e:
                logger.warning("ignoring the unreadable packed weights %s: %s", self.path, e)

    def get(self, name: str, fmt: WeightFormat, make: Callable[[], Packed]) -> Packed:
        """Tensor ``name``'s weight in ``fmt``: from the store, else ``make()`` (kept)."""
        key = f"{name}:{fmt.name}"
        if key in self.found:
            return fmt.kernel.packed(*self.found[key])
        packed = make()
        self.made[key] = list(packed)
        return packed

    def save(self) -> None:
        """Write the store with what was made (atomically), where anything was."""
        if self.path is None or not self.made:
            return
        logger.info("keeping %d packed weights for the next load in %s", len(self.made), self.path)
        try:
            with tempfile.NamedTemporaryFile(dir=self.path.parent, delete=False) as f:
                torch.save({**self.found, **self.made}, f)
            os.replace(f.name, self.path)
        except OSError as e:
            logger.warning("could not keep the packed weights in %s: %s", self.path, e)
