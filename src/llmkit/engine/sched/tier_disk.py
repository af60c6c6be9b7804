"""The prompt cache's disk tier: one file per block, written atomically, bounded, LRU. No torch.

``DIR/<model identity>/<group>-<block hash>.kv`` holds a header (magic, version, group,
model, hash, token count, payload length), the block's tokens, its K/V bytes and a CRC-32 of
all of it. A file is written under a temporary name and renamed, so an entry's name never
holds a torn write; a file whose size, checksum, names or tokens are wrong is removed when
read, with a log line, and never loaded. Writes run on a background thread; the index of
entries (least recently used first, by modification time at start) bounds the tier's bytes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import struct
import threading
import zlib
from array import array
from collections import OrderedDict
from pathlib import Path

logger = logging.getLogger(__name__)

_MAGIC, _VERSION = b"LKPC", 1
_HEADER = struct.Struct("<4sHH32s32sIQ")
_CRC = struct.Struct("<I")
_SUFFIX = ".kv"
_MAX_PENDING = 4096  # writes queued beyond this are skipped: the disk tier is best effort

Tokens = tuple[int, ...]


def encode(model: bytes, group: int, key: bytes, tokens: Tokens, payload: bytes) -> bytes:
    """An entry's file content."""
    header = _HEADER.pack(_MAGIC, _VERSION, group, model, key, len(tokens), len(payload))
    body = header + array("q", tokens).tobytes() + payload
    return body + _CRC.pack(zlib.crc32(body))


def decode(data: bytes, model: bytes, group: int, key: bytes, tokens: Tokens) -> bytes:
    """The payload of an entry's file content; ValueError says what is wrong with it."""
    if len(data) < _HEADER.size + _CRC.size:
        raise ValueError(f"{len(data)} bytes, shorter than a header")
    magic, version, g, m, k, n, length = _HEADER.unpack_from(data)
    if magic != _MAGIC or version != _VERSION:
        raise ValueError("not an entry of this version")
    expected = _HEADER.size + 8 * n + length + _CRC.size
    if len(data) != expected:
        raise ValueError(f"{len(data)} bytes where its header says {expected} (truncated?)")
    (crc,) = _CRC.unpack_from(data, expected - _CRC.size)
    if zlib.crc32(memoryview(data)[: expected - _CRC.size]) != crc:
        raise ValueError("checksum mismatch")
    if (m, g, k) != (model, group, key):
        raise ValueError("the entry names another block")
    stored = array("q")
    stored.frombytes(data[_HEADER.size : _HEADER.size + 8 * n])
    if tuple(stored) != tokens:
        raise ValueError("the entry holds other tokens")
    return data[_HEADER.size + 8 * n : expected - _CRC.size]


class DiskTier:
    """Entries under ``root``, at most ``capacity`` bytes of them."""

    def __init__(self, root: Path, capacity: int):
        self.root = root
        self.capacity = capacity
        self._lock = threading.Lock()
        self._index: OrderedDict[Path, int] = OrderedDict()  # least recently used first
        self._used: dict[str, int] = {}  # bytes per model folder
        self._total = 0
        self._pending: queue.Queue[tuple[Path, tuple[bytes, int, bytes, Tokens, bytes]]] = (
            queue.Queue()
        )
        root.mkdir(parents=True, exist_ok=True)
        self._scan()
        self._writer = threading.Thread(target=self._write_loop, name="llmkit-prompt-cache")
        self._writer.daemon = True
        self._writer.start()

    def path(self, model: bytes, group: int, key: bytes) -> Path:
        return self.root / model.hex() / f"{group}-{key.hex()}{_SUFFIX}"

    def contains(self, model: bytes, group: int, key: bytes) -> bool:
        with self._lock:
            return self.path(model, group, key) in self._index

    def nbytes(self, model: bytes) -> int:
        with self._lock:
            return self._used.get(model.hex(), 0)

    def read(self, model: bytes, group: int, key: bytes, tokens: Tokens) -> bytes | None:
        path = self.path(model, group, key)
        with self._lock:
            if path not in self._index:
                return None
            self._index.move_to_end(path)
        try:
            payload = decode(path.read_bytes(), model, group, key, tokens)
        except (OSError, ValueError) as exc:
            logger.warning("prompt cache: ignored and removed the disk entry %s: %s", path, exc)
            with self._lock:
                self._remove(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # the next start orders entries by last use
        return payload

    def write(self, model: bytes, group: int, key: bytes, tokens: Tokens, payload: bytes) -> None:
        """Queue the entry's write, unless it is already there."""
        path = self.path(model, group, key)
        with self._lock:
            if path in self._index:
                self._index.move_to_end(path)
                return
        if self._pending.qsize() < _MAX_PENDING:  # encoded on the writer's thread
            self._pending.put((path, (model, group, key, tokens, payload)))

    def flush(self) -> None:
        self._pending.join()

    def clear(self, model: bytes) -> None:
        self.flush()
        with self._lock:
            for path in [p for p in self._index if p.parent.name == model.hex()]:
                self._remove(path)
        shutil.rmtree(self.root / model.hex(), ignore_errors=True)

    def _scan(self) -> None:
        found = []
        for path in self.root.glob(f"*/*{_SUFFIX}*"):
            if path.name.endswith(".tmp"):  # a write a crash interrupted
                path.unlink(missing_ok=True)
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            found.append((stat.st_mtime_ns, path, stat.st_size))
        for _, path, size in sorted(found):
            self._add(path, size)
        self._evict()

    def _write_loop(self) -> None:
        while True:
            path, entry = self._pending.get()
            try:
                self._write(path, encode(*entry))
            except OSError as exc:
                logger.warning("prompt cache: could not write %s: %s", path, exc)
            finally:
                self._pending.task_done()

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        with self._lock:
            if path not in self._index:
                self._add(path, len(data))
            self._evict()

    def _add(self, path: Path, size: int) -> None:
        self._index[path] = size
        self._used[path.parent.name] = self._used.get(path.parent.name, 0) + size
        self._total += size

    def _remove(self, path: Path) -> None:
        size = self._index.pop(path, None)
        if size is not None:
            self._used[path.parent.name] -= size
            self._total -= size
        with contextlib.suppress(OSError):  # gone from the index either way
            path.unlink(missing_ok=True)

    def _evict(self) -> None:
        while self._index and self._total > self.capacity:
            self._remove(next(iter(self._index)))
