"""Which replica takes a request: the least loaded, or the one a long shared prefix prefers.

Requests that start with the same ``prefix_tokens`` tokens prefer the same replica, so its
prefix cache holds that prefix, as long as it is not much busier than the least loaded.
"""

from __future__ import annotations

from collections.abc import Sequence


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
