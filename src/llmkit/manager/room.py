"""Making room for a model: which loaded models to unload so that it fits the count and the
memory budget. The least recently used idle ones go first; one with requests in flight, or a
pinned one, never does (:attr:`Slot.evictable`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from llmkit.manager.slot import Slot


class Budget(NamedTuple):
    """How many models may be resident at once (None: any) and in how many bytes."""

    max_loaded_models: int | None
    memory_bytes: int

    def fits(self, models: int, used: int) -> bool:
        """Whether ``models`` resident models using ``used`` bytes leave room for one more."""
        within_count = self.max_loaded_models is None or models < self.max_loaded_models
        return within_count and used <= self.memory_bytes


def room_for(slot: Slot, slots: Iterable[Slot], budget: Budget) -> list[Slot] | None:
    """The idle models to unload (least recently used first) so that ``slot`` fits, or
    None if it cannot fit until some request ends."""
    others = [s for s in slots if s is not slot and s.occupies]
    count, used = len(others), sum(s.resident_bytes for s in others)
    idle = sorted((s for s in others if s.evictable), key=lambda s: s.last_used)
    victims: list[Slot] = []
    while not budget.fits(count, used + slot.resident_bytes):
        if not idle:
            return None
        victim = idle.pop(0)
        victims.append(victim)
        count, used = count - 1, used - victim.resident_bytes
    return victims
