"""The engine's side of the prompt cache's tiers (``engine/sched/tiers.py``): which store an
engine reaches, the model identity its entries are kept under, and the copies between the
pool and the tiers that each step (and the engine's close) makes."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import torch

from llmkit.config import EngineConfig
from llmkit.engine.sched.kv_cache import BlockAllocator, BlockMoves
from llmkit.engine.sched.tiers import STATE_GROUP, TIERS, ModelTiers, shared_tiers
from llmkit.model.kv_blocks import group_caches, read_rows, write_rows
from llmkit.model.recurrent import RecurrentStates
from llmkit.model.runner import ModelRunner

logger = logging.getLogger(__name__)

_IDENTITY_VERSION = b"llmkit-prompt-cache-1"
# Files up to this size are read whole; larger ones sampled (~4 MiB read at every start).
_WHOLE = 4 << 20
_SAMPLES, _SAMPLE = 64, 64 << 10
_WEIGHTS = (".gguf", ".safetensors", ".bin", ".pt", ".json")


def open_tiers(config: EngineConfig, model_path: str, runner: ModelRunner) -> ModelTiers | None:
    """The tiers this engine's prefix cache reaches below its pool, or None (none are
    configured, or the engine cannot use them)."""
    gib = 1 << 30
    host, disk = int(config.prompt_cache_gib * gib), int(config.prompt_cache_disk_gib * gib)
    wanted = host or config.prompt_cache_dir
    if not (wanted and config.enable_prefix_caching) or runner.is_encoder:
        return None
    why = (
        "tensor parallelism (each rank holds a shard of every block)"
        if config.tensor_parallel_size > 1
        else "a draft model (its KV cache shares the target's block ids)"
        if (config.speculative_config or {}).get("method") == "draft_model"
        else None
    )
    if why:
        logger.info("prompt cache: no tiers below the KV pool with %s", why)
        return None
    store = shared_tiers(host, config.prompt_cache_dir, disk)
    return store.for_model(model_identity(config, model_path, runner))


def model_identity(config: EngineConfig, model_path: str, runner: ModelRunner) -> bytes:
    """A digest of the model's weights and of everything that shapes its K/V."""
    h = hashlib.sha256(_IDENTITY_VERSION)
    for part in (
        content_digest(Path(model_path)),
        str(runner.dtype),
        str(runner.kv_dtype),
        runner.device.type,
        runner.backend.name,
        repr(runner.kv_layout),
        str(config.quantization),
        str(config.quantization_group_size),
        str(config.block_size),
    ):
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.digest()


def content_digest(path: Path) -> bytes:
    """A digest of a model file's (or a folder's weight and config files') content: whole
    up to 4 MiB, else its size, modification time, head, tail and 64 samples between."""
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.suffix in _WEIGHTS)
    h = hashlib.sha256()
    for file in files:
        stat = file.stat()
        h.update(f"{file.name}\0{stat.st_size}\0".encode())
        with file.open("rb") as f:
            if stat.st_size <= _WHOLE:
                h.update(f.read())
                continue
            h.update(str(stat.st_mtime_ns).encode())
            step = (stat.st_size - _SAMPLE) // (_SAMPLES + 1)
            for offset in [0, *range(step, stat.st_size - _SAMPLE, step), stat.st_size - _SAMPLE]:
                f.seek(offset)
                h.update(f.read(_SAMPLE))
    return h.digest()


def tier_fields(allocator: BlockAllocator) -> dict[str, Any]:
    """The prompt cache's fields of ``EngineStats``."""
    if allocator.tiers is None:
        return {}
    stats = allocator.tier_stats
    host, disk = allocator.tiers.nbytes()
    fields: dict[str, Any] = {
        "prompt_cache_host_bytes": host,
        "prompt_cache_disk_bytes": disk,
        "prompt_cache_saved_seconds": stats.saved_s,
    }
    for tier in TIERS:
        fields[f"prompt_cache_{tier}_queried_tokens"] = stats.queried[tier]
        fields[f"prompt_cache_{tier}_hit_tokens"] = stats.hits[tier]
    return fields


def move_blocks(runner: ModelRunner, tiers: ModelTiers, moves: BlockMoves) -> None:
    """Make the copies ``moves`` plans: the saves (pool -> tiers), then the loads (a hybrid's
    states wait for the step: it copies checkpoints first, which may read a slot loaded into)."""
    for group in {g for g, *_ in moves.saves}:
        saves = [s for s in moves.saves if s[0] == group]
        payloads = read_rows(_pools(runner, group), [where for _, where, _, _ in saves])
        for (_, _, key, tokens), payload in zip(saves, payloads):
            tiers.put(group, key, tokens, payload)
    for group in {g for g, *_ in moves.loads}:
        loads = [(where, payload) for g, where, payload in moves.loads if g == group]
        if group == STATE_GROUP:
            _states(runner).pending += loads
        else:
            write_rows(_pools(runner, group), [w for w, _ in loads], [p for _, p in loads])


def _pools(runner: ModelRunner, group: int) -> list[torch.Tensor]:
    """The pools a row of ``group`` spans: a KV block's caches, or a state slot's."""
    if group == STATE_GROUP:
        return _states(runner).pools
    return group_caches(runner.kv_caches, runner.kv_layout, group)


def _states(runner: ModelRunner) -> RecurrentStates:
    assert runner.states is not None, "a recurrent state move for a model without states"
    return runner.states
