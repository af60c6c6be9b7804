"""KV block allocator: reference counts, prefix caching, LRU reuse. No torch.

A block holds ``block_size`` consecutive tokens of one sequence. Full blocks are named
by their chained hash (``prefix_index.py``), so two sequences with the same prefix share
them; a block whose reference count drops to zero keeps its name and stays findable until it
is reused, least recently freed first (and then, with tiers, below the pool).

Layers of sliding-window attention form groups of their own (see :class:`BlockAllocator`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence

from llmkit.engine.sched.prefix_index import (
    NO_BLOCK,
    BlockMoves,
    Found,
    PrefixCacheStats,
    PrefixIndex,
)
from llmkit.engine.sched.request import Request
from llmkit.engine.sched.state_cache import StateCache
from llmkit.engine.sched.tiers import ModelTiers, Restore, TierStats
from llmkit.model.state_ops import StateOps

__all__ = ["NO_BLOCK", "BlockAllocator", "BlockMoves"]


def _held(block: int) -> bool:
    return block != NO_BLOCK


class BlockAllocator:
    """Hands out KV blocks to requests and takes them back.

    ``windows`` has one entry per KV cache group (``model/kv_layout.py``): the layers of a
    group share a block table; a group of sliding-window layers (an int: the keys a query
    sees) keeps only the blocks its window can still reach and gives the older ones back,
    leaving ``NO_BLOCK`` in their place. All groups draw from the one pool, so a long context
    costs the full-attention groups' blocks plus a window's worth per windowed group.

    ``state_slots``: a hybrid model's recurrent state slots, which follow the blocks: taken
    with a request's first blocks, given back with them, a prefix hit only where a checkpoint
    holds the state after it (``state_cache.py``).

    ``tiers``: where named blocks go when the pool reuses them, and where a lookup finds them
    again (``tiers.py``); :meth:`take_moves` hands the runner the copies a step needs.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        windows: Sequence[int | None] = (None,),
        state_slots: int = 0,
        tiers: ModelTiers | None = None,
    ):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.windows = tuple(windows)
        self._ref_cnt = [0] * num_blocks
        # Blocks with no reference, oldest first; popping from the front reuses them LRU.
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self._owned: dict[Request, list[list[int]]] = {}
        self.states = (
            StateCache(state_slots, block_size, enable_prefix_caching) if state_slots else None
        )
        tiers = tiers if enable_prefix_caching else None
        self.index = PrefixIndex(num_blocks, block_size, self.windows, self.states, tiers)

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def block_ids(self, request: Request) -> list[int]:
        """The request's blocks in the first group (every group when there is one)."""
        owned = self._owned.get(request)
        return owned[0] if owned else []

    def group_block_ids(self, request: Request) -> list[list[int]]:
        """The request's blocks in every group after the first."""
        return self._owned.get(request, [[]])[1:]

    def state_ops(self, request: Request) -> StateOps | None:
        """The step's work on the request's recurrent state (a hybrid model's)."""
        return None if self.states is None else self.states.ops(request)

    @property
    def tiers(self) -> ModelTiers | None:
        return self.index.tiers

    @property
    def stats(self) -> PrefixCacheStats:
        return self.index.stats

    @property
    def tier_stats(self) -> TierStats:
        return self.index.tier_stats

    def find_cached(self, request: Request) -> Found:
        """Per group, the blocks of the longest cached prefix of the request's tokens
        (:meth:`PrefixIndex.find`); none without prefix caching."""
        if not self.enable_prefix_caching:
            return [[] for _ in self.windows]
        return self.index.find(request)

    def take_moves(self) -> BlockMoves:
        """The copies to and from the tiers that the runner makes before the next step."""
        return self.index.take_moves()

    def spill(self) -> BlockMoves:
        """The engine is closing: saves of every named block the tiers lack."""
        return self.index.spill() if self.tiers is not None else BlockMoves()

    def allocate(
        self,
        request: Request,
        num_new_tokens: int,
        cached: Sequence[Sequence[int | Restore]] = (),
    ) -> bool:
        """Give ``request`` room for ``num_new_tokens`` more tokens after its computed ones.

        ``cached`` are the blocks per group from :meth:`find_cached` to take first (a
        :class:`Restore` takes a free block, named at once, filled before the step runs). A
        windowed group first gives back the blocks its window has passed (the request never
        reads them again). Returns False (and takes nothing) when there are not enough free
        blocks.
        """
        owned = self._owned.get(request) or [[] for _ in self.windows]
        taken = [list(c) for c in cached] or [[] for _ in self.windows]
        start = request.num_computed_tokens + len(taken[0]) * self.block_size
        end = start + num_new_tokens
        for g, window in enumerate(self.windows):
            if window is not None:
                self._pass_window(owned[g], self.index.first_kept(g, start))
        total = -(-end // self.block_size)
        needed = [total - len(o) - len(c) for o, c in zip(owned, taken)]
        if not cached and max(needed) <= 0:  # most decode steps: the last block has room
            self._register_full_blocks(request, owned, end)
            self._plan_state(request, start, end, 0)
            return True
        pooled = [b for c in taken for b in c if isinstance(b, int) and b != NO_BLOCK]
        restored = sum(1 for c in taken for b in c if isinstance(b, Restore))
        revived = sum(1 for b in pooled if self._ref_cnt[b] == 0)
        if sum(max(n, 0) for n in needed) + revived + restored > len(self._free):
            return False
        for block in pooled:  # before any free block is taken: one of them may be these
            if self._ref_cnt[block] == 0:
                del self._free[block]
            self._ref_cnt[block] += 1
        for g in range(len(self.windows)):
            owned[g] += [b if isinstance(b, int) else self._restore(g, b) for b in taken[g]]
            owned[g] += [self._take_free() for _ in range(max(needed[g], 0))]
        self._owned[request] = owned
        self._register_full_blocks(request, owned, end)
        self._plan_state(request, start, end, len(taken[0]))
        return True

    def _plan_state(self, request: Request, start: int, end: int, hit: int) -> None:
        if self.states is not None:
            resume = request.block_hashes[hit - 1] if hit else None
            restore = self.index.state_restore(request) if hit else None
            self.states.plan(request, start, end, resume, restore)

    def _pass_window(self, blocks: list[int], first_kept: int) -> None:
        """Give back a windowed group's blocks before ``first_kept`` (they keep their names,
        findable until reused, most recently passed last)."""
        # Passed blocks lead the list: start after them, not at the context's first block.
        for i in range(bisect_left(blocks, True, key=_held), min(first_kept, len(blocks))):
            self._release(blocks[i])
            blocks[i] = NO_BLOCK

    def _release(self, block: int) -> None:
        self._ref_cnt[block] -= 1
        if self._ref_cnt[block] == 0:
            self._free[block] = None
            if not self.index.is_named(block):
                # Nothing to find in it: reuse it before any cached block.
                self._free.move_to_end(block, last=False)

    def free(self, request: Request, sound: bool = True) -> None:
        """Drop the request's references; its tail blocks become the first to be reused.
        ``sound=False``: its states are suspect (it failed), so none is kept as a checkpoint."""
        if self.states is not None:
            self.states.release(request, keep=sound)
        for blocks in self._owned.pop(request, []):
            for block in reversed(blocks):
                if block != NO_BLOCK:
                    self._release(block)

    def trim(self, request: Request, num_tokens: int) -> None:
        """Give back ``request``'s blocks past its first ``num_tokens`` tokens (rejected
        speculative tokens: never named, as only known tokens are hashed)."""
        keep = -(-num_tokens // self.block_size)
        for blocks in self._owned.get(request, []):
            for block in reversed(blocks[keep:]):
                if block != NO_BLOCK:
                    self._release(block)
                    self._free.move_to_end(block, last=False)
            del blocks[keep:]

    def forget(self, request: Request) -> None:
        """Free the request and unname its blocks that nobody else holds (their KV is suspect)."""
        blocks = [b for group in self._owned.get(request, []) for b in group if b != NO_BLOCK]
        self.free(request, sound=False)
        for block in blocks:
            if self._ref_cnt[block] == 0:
                self.index.unname(block)

    def reset_prefix_cache(self) -> int:
        """Forget the prefix of every block no request holds (vLLM's ``reset_prefix_cache``:
        later prompts recompute what they would have found), and the tiers' entries; blocks
        in use keep theirs, so a live request's named blocks stay a prefix of its blocks.
        Returns how many."""
        return self.index.reset(list(self._free))

    def _take_free(self) -> int:
        block, _ = self._free.popitem(last=False)
        self.index.reuse(block)
        self._ref_cnt[block] = 1
        return block

    def _restore(self, group: int, restore: Restore) -> int:
        block = self._take_free()
        self.index.restore(group, block, restore)
        return block

    def _register_full_blocks(self, request: Request, owned: list[list[int]], end: int) -> None:
        # Blocks are named as soon as the step that fills them is scheduled: K/V are
        # written before attention reads them in every layer, so a request scheduled in
        # the same step (a sibling of n > 1) can already share them.
        if not self.enable_prefix_caching:
            return
        self.index.update_hashes(request)
        full = min(end // self.block_size, len(request.block_hashes))
        for g, blocks in enumerate(owned):
            # A live request's named blocks are a prefix of its blocks (a block is unnamed
            # only once nobody holds it), so walk back from the last full one to the first
            # named (or the first a window has passed).
            for i in reversed(range(full)):
                block = blocks[i]
                if block == NO_BLOCK or self.index.is_named(block):
                    break
                self.index.name(request, g, block, i)
