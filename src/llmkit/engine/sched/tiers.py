"""The prefix cache's tiers below the KV pool: host memory and disk. No torch.

When the pool reuses a cached block, its K/V go to a bounded host-memory tier (and, with a
directory, to a disk tier as well); when an engine closes (a model unloaded, a server
stopped), every block its pool has named goes there too. A request's prefix lookup walks the
pool, then host, then disk; a block found below the pool is copied into a fresh pool block
instead of being computed again (``kv_cache.py`` plans the copies, the runner makes them).

An entry's key is the model's identity (a digest of its weights' content and of everything
that shapes its K/V: dtype, quantization, KV dtype, block size, device), the KV cache group
and the block's chain hash, which covers every token before it: a changed model file never
meets its old entries. An entry keeps its tokens, checked against the request's before use.
The disk tier writes an entry whole to a temporary file and renames it (a crash never leaves
a torn entry under an entry's name), with a checksum, and reads one back only if every check
holds; a bad one is removed, with a log line. Both tiers drop the least recently used first.

One store per process and configuration (:func:`shared_tiers`): the engines of a model
manager share it, so a model's next load finds what its last one left, and a restart finds
the disk tier.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from llmkit.engine.sched.tier_disk import DiskTier

logger = logging.getLogger(__name__)

POOL, HOST, DISK = "pool", "host", "disk"
TIERS = (POOL, HOST, DISK)
STATE_GROUP = 0xFFFF  # the "group" of a hybrid's recurrent-state checkpoints

Tokens = tuple[int, ...]
_Key = tuple[bytes, int, bytes]  # model identity, KV cache group, block hash


@dataclass(frozen=True)
class Restore:
    """A block found below the pool: the bytes a fresh pool block is filled with."""

    key: bytes  # the block's chain hash
    tokens: Tokens
    payload: bytes
    tier: str


@dataclass
class TierStats:
    """Tokens a prefix lookup asked of each tier (those the tiers above it lacked) and found
    there (a miss at a tier: a token asked and not found), and an estimate of the prefill
    time the hits saved, at the engine's measured prompt speed."""

    queried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    saved_s: float = 0.0
    seconds_per_token: float = 0.0  # of recent prompt-heavy steps

    def count(self, queried: int, found: dict[str, int]) -> None:
        for tier in TIERS:
            self.queried[tier] += queried
            self.hits[tier] += found.get(tier, 0)
            queried -= found.get(tier, 0)
        self.saved_s += sum(found.values()) * self.seconds_per_token

    def time_step(self, seconds: float, tokens: int) -> None:
        """A prompt-heavy step of ``tokens`` took ``seconds``."""
        rate = seconds / tokens
        old = self.seconds_per_token
        self.seconds_per_token = rate if old == 0 else 0.8 * old + 0.2 * rate


class PromptTiers:
    """The host tier (``host_bytes``) and, with ``disk_dir``, the disk tier (``disk_bytes``).
    Thread-safe: the engines of one process share it."""

    def __init__(self, host_bytes: int, disk_dir: Path | None = None, disk_bytes: int = 0):
        self.host_bytes = host_bytes
        self._host: OrderedDict[_Key, tuple[Tokens, bytes]] = OrderedDict()
        self._host_used: dict[bytes, int] = {}  # per model
        self._host_total = 0
        self._lock = threading.Lock()
        self.disk = DiskTier(disk_dir, disk_bytes) if disk_dir is not None else None

    def for_model(self, model: bytes) -> ModelTiers:
        return ModelTiers(self, model)

    def contains(self, key: _Key) -> bool:
        with self._lock:
            if key in self._host:
                return True
        return self.disk is not None and self.disk.contains(*key)

    def put(self, key: _Key, tokens: Tokens, payload: bytes) -> None:
        """Keep a block's bytes in host memory and, with a disk tier, write them there too
        (in the background: the step does not wait on the disk)."""
        if self.host_bytes:
            with self._lock:
                self._insert(key, tokens, payload)
        if self.disk is not None:
            self.disk.write(*key, tokens, payload)

    def fetch(self, key: _Key, tokens: Tokens) -> Restore | None:
        """The entry under ``key`` if it holds ``tokens``; a disk entry is kept in host
        memory from then on. A wrong entry is dropped (``contains`` is False after a None)."""
        with self._lock:
            held = self._host.get(key)
            if held is not None:
                if held[0] == tokens:
                    self._host.move_to_end(key)
                    return Restore(key[2], tokens, held[1], HOST)
                logger.warning("a host-tier prompt cache entry holds other tokens; dropped")
                self._drop(key)
        if self.disk is None:
            return None
        payload = self.disk.read(*key, tokens)
        if payload is None:
            return None
        if self.host_bytes:
            with self._lock:
                self._insert(key, tokens, payload)
        return Restore(key[2], tokens, payload, DISK)

    def nbytes(self, model: bytes) -> tuple[int, int]:
        """``model``'s bytes in host memory and on disk."""
        with self._lock:
            host = self._host_used.get(model, 0)
        return host, self.disk.nbytes(model) if self.disk is not None else 0

    def clear(self, model: bytes) -> None:
        """Forget every entry of ``model``, in both tiers."""
        with self._lock:
            for key in [k for k in self._host if k[0] == model]:
                self._drop(key)
        if self.disk is not None:
            self.disk.clear(model)

    def flush(self) -> None:
        """Wait until the disk tier holds every entry put so far."""
        if self.disk is not None:
            self.disk.flush()

    def _insert(self, key: _Key, tokens: Tokens, payload: bytes) -> None:
        if key in self._host:
            self._host.move_to_end(key)
            return
        size = _size(tokens, payload)
        if size > self.host_bytes:
            return
        while self._host and self._host_total + size > self.host_bytes:
            self._drop(next(iter(self._host)))
        self._host[key] = (tokens, payload)
        self._host_used[key[0]] = self._host_used.get(key[0], 0) + size
        self._host_total += size

    def _drop(self, key: _Key) -> None:
        tokens, payload = self._host.pop(key)
        self._host_used[key[0]] -= _size(tokens, payload)
        self._host_total -= _size(tokens, payload)


def _size(tokens: Tokens, payload: bytes) -> int:
    return len(payload) + 8 * len(tokens)


@dataclass(frozen=True)
class ModelTiers:
    """One model's view of the tiers: its entries, by (group, block hash)."""

    store: PromptTiers
    model: bytes

    def contains(self, group: int, key: bytes) -> bool:
        return self.store.contains((self.model, group, key))

    def fetch(self, group: int, key: bytes, tokens: Tokens) -> Restore | None:
        return self.store.fetch((self.model, group, key), tokens)

    def put(self, group: int, key: bytes, tokens: Tokens, payload: bytes) -> None:
        self.store.put((self.model, group, key), tokens, payload)

    def nbytes(self) -> tuple[int, int]:
        return self.store.nbytes(self.model)

    def clear(self) -> None:
        self.store.clear(self.model)

    def flush(self) -> None:
        self.store.flush()


_STORES: dict[tuple[int, str | None, int], PromptTiers] = {}
_STORES_LOCK = threading.Lock()


def shared_tiers(host_bytes: int, disk_dir: str | None, disk_bytes: int) -> PromptTiers:
    """The process's store for this configuration, made on first use."""
    where = str(Path(disk_dir).expanduser().resolve()) if disk_dir else None
    with _STORES_LOCK:
        store = _STORES.get((host_bytes, where, disk_bytes))
        if store is None:
            store = PromptTiers(host_bytes, Path(where) if where else None, disk_bytes)
            _STORES[(host_bytes, where, disk_bytes)] = store
        return store


@atexit.register
def _flush_all() -> None:
    """A server that stops writes what its engines spilled before the process ends."""
    for store in list(_STORES.values()):
        store.flush()
