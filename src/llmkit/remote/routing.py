"""Which replica takes a request: the least loaded, or the one a long shared prefix prefers.

Requests that start with the same ``prefix_tokens`` tokens prefer the same replica, so its
prefix cache holds that prefix, as long as it is not much busier than the least loaded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from llmkit.engine.core.stats import EngineStats


class Router:
    def __init__(self, prefix_tokens: int, slack: int):
        self.prefix_tokens = prefix_tokens  # 0: no prefix affinity
        self.slack = slack  # how many more requests the preferred replica may have
        self._turn = 0

    def choose(self, token_ids: Sequence[int], loads: dict[int, int], salt: int = 0) -> int:
        """A replica of ``loads`` (alive replica -> requests in flight on it); ``salt``
        keys the prefix with what else decides whether KV is shared (the LoRA adapter)."""
        alive = sorted(loads)
        least = min(loads.values())
        if self.prefix_tokens and len(token_ids) >= self.prefix_tokens:
            preferred = alive[hash((salt, *token_ids[: self.prefix_tokens])) % len(alive)]
            if loads[preferred] <= least + self.slack:
                return preferred
        # Ties go round: requests that arrive one at a time still spread.
        idle = [i for i in alive if loads[i] == least]
        self._turn += 1
        return idle[self._turn % len(idle)]


def merge_stats(snapshots: Sequence[EngineStats]) -> EngineStats:
    """One snapshot for a group: counts and totals add up, the hit rate is weighted by
    prompt tokens, and the queue limits are the sum of the replicas' limits."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(EngineStats):
        values = [getattr(s, f.name) for s in snapshots]
        if f.name == "prefix_cache_hit_rate":
            weights = [s.prompt_tokens for s in snapshots]
            total = sum(weights)
            fields[f.name] = sum(v * w for v, w in zip(values, weights)) / total if total else 0.0
        elif f.name == "queue_wait_buckets":
            fields[f.name] = tuple(sum(b) for b in zip(*values)) if values else ()
        elif f.name.startswith("max_queued"):
            fields[f.name] = None if None in values else sum(values)
        else:
            fields[f.name] = sum(values)
    return EngineStats(**fields)
