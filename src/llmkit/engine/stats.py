"""EngineStats: a snapshot of an engine's load and counters; no torch, so any client holds one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineStats:
    """A snapshot of the engine's load and counters."""

    num_running: int
    num_waiting: int
    kv_blocks_total: int
    kv_blocks_free: int
    prefix_cache_hit_rate: float
    generated_tokens: int
    prompt_tokens: int
    steps: int
    num_preemptions: int
