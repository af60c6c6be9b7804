"""Tokenizers kept for the next engine of the same model: building one parses the model's
tokenizer.json twice (0.2 s for SmolLM2's 49k vocabulary, three times that on a busy
machine), which a model manager would otherwise pay on every load of a model it swapped out."""

from __future__ import annotations

import threading
from pathlib import Path

from llmkit.engine.core.tokenizer import Tokenizer

# What a tokenizer's files look like: each file of its folder by name, modification time and
# size (None: not a folder, such as a hub name).
Stamp = tuple[tuple[str, int, int], ...] | None


class Tokenizers:
    """Each tokenizer folder's tokenizer, built on first use and kept while the folder's files
    stay as they were. A tokenizer is not changed once built, so engines may share one."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Stamp, Tokenizer]] = {}
        self._lock = threading.Lock()  # engines load in worker threads

    def get(self, path: str) -> Tokenizer:
        stamp = _stamp(path)
        with self._lock:
            kept = self._kept.get(path)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        tokenizer = Tokenizer(path)
        with self._lock:
            self._kept[path] = (stamp, tokenizer)
        return tokenizer


def _stamp(path: str) -> Stamp:
    folder = Path(path)
    if not folder.is_dir():
        return None
    files = ((p.name, p.stat()) for p in folder.iterdir() if p.is_file())
    return tuple(sorted((name, s.st_mtime_ns, s.st_size) for name, s in files))
