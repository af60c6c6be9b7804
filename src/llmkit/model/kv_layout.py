"""How a model's KV caches share one pool of blocks: groups of layers and their tensors.

A model whose layers attend differently (gpt-oss: a 128-token window on every other layer;
Gemma 3: five local layers to one global) would waste most of a windowed layer's cache
if every layer kept the whole context. As vLLM's hybrid KV cache manager does, layers of one
kind form *groups* of equal size; a group's layers share one block table, and a windowed
group gives back the blocks its window has passed (``engine/sched/kv_cache.py``). The
groups draw from one pool: a block id names a *page*, the same slot of one tensor pair per
layer position in a group, so layer ``j`` of every group writes tensor pair ``j`` and a
page is ``layers_per_page`` layers' worth of one block. Every group can then take any free
page, and the pool is not split in advance between kinds.

Caches of different shapes share a slot at the larger one's size (Gemma 4's global layers
have fewer, wider KV heads than its local ones): the smaller cache is a view of each page's
first bytes, its blocks contiguous and further apart than its own size. A model of one kind
keeps one group (where that kind is a window, the group still gives back what it passed).
"""

from __future__ import annotations

from dataclasses import dataclass

Shape = tuple[int, int]  # (KV heads, head dim)


@dataclass(frozen=True)
class KVLayout:
    windows: tuple[int | None, ...]  # per group: its layers' window (None: the whole context)
    cache_groups: tuple[int, ...]  # per KV cache (as the model numbers them): its group
    cache_slots: tuple[int, ...]  # per KV cache: the tensor pair it reads and writes
    slot_sizes: tuple[int, ...]  # per tensor pair: K (or V) elements a token, its widest cache's

    @property
    def layers_per_page(self) -> int:
        return len(self.slot_sizes)

    def describe(self) -> str:
        """For the log: the groups, by kind."""
        if len(self.windows) == 1:
            kind = "whole context" if self.windows[0] is None else f"window {self.windows[0]}"
            return f"one KV cache group ({kind})"
        windowed = sum(w is not None for w in self.windows)
        return (
            f"{len(self.windows)} KV cache groups of {self.layers_per_page} layers "
            f"({len(self.windows) - windowed} whole context, {windowed} windowed: "
            f"{', '.join(sorted({str(w) for w in self.windows if w is not None}))})"
        )

    def blocks_per_sequence(self, num_tokens: int, chunk: int, block_size: int) -> int:
        """The most pages one sequence of ``num_tokens`` holds, computed ``chunk`` tokens a
        step: a windowed group holds the window before a chunk and the chunk."""
        full = -(-num_tokens // block_size)
        return sum(
            full if w is None else min(full, -(-(w - 1 + chunk) // block_size) + 1)
            for w in self.windows
        )


def plan_kv_layout(shapes: list[Shape], windows: list[int | None], hybrid: bool = True) -> KVLayout:
    """The layout of caches of ``shapes`` whose layers see ``windows``; ``hybrid=False``
    keeps every cache for the whole context (vLLM's ``disable_hybrid_kv_cache_manager``)."""
    n = len(shapes)
    kinds = sorted(set(windows), key=lambda w: -1 if w is None else w) or [None]
    if not hybrid or len(kinds) == 1:
        window = kinds[0] if hybrid else None
        own = tuple(heads * dim for heads, dim in shapes)
        return KVLayout((window,), (0,) * n, tuple(range(n)), own)
    members = {w: [i for i in range(n) if windows[i] == w] for w in kinds}
    size = min(len(m) for m in members.values())
    group_windows: list[int | None] = []
    groups, slots, sizes = [0] * n, [0] * n, [0] * size
    for w in kinds:  # the whole-context kind first: a draft model reads group 0's blocks
        caches = members[w]
        for start in range(0, len(caches), size):
            for slot, cache in enumerate(caches[start : start + size]):
                groups[cache], slots[cache] = len(group_windows), slot
                sizes[slot] = max(sizes[slot], shapes[cache][0] * shapes[cache][1])
            group_windows.append(w)
    return KVLayout(tuple(group_windows), tuple(groups), tuple(slots), tuple(sizes))
