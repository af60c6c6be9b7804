"""KV block allocator: reference counts, prefix caching by hash chain, LRU reuse. No torch.

A block holds ``block_size`` consecutive tokens of one sequence. A full block is named by
the hash of its tokens chained to the hash of the block before it, so two sequences with
the same prefix name the same blocks and can share them. A block whose reference count
drops to zero keeps its hash and stays findable until it is reused, least recently freed
first.

Layers of sliding-window attention form groups of their own (see :class:`BlockAllocator`).
"""

from __future__ import annotations

import hashlib
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from llmkit.engine.sched.request import Request
from llmkit.engine.sched.state_cache import StateCache
from llmkit.model.state_ops import StateOps

NO_BLOCK = -1  # a windowed group's table entry for a block its window has passed


def _held(block: int) -> bool:
    return block != NO_BLOCK


def hash_block(parent: bytes, tokens: list[int], extra: bytes = b"") -> bytes:
    """The chained hash of a full block. sha256: a crafted collision would leak KV content.

    ``extra`` names what the tokens alone do not say (the image behind placeholder tokens).
    """
    return hashlib.sha256(parent + array("q", tokens).tobytes() + extra).digest()


@dataclass
class PrefixCacheStats:
    queried_tokens: int = 0
    hit_tokens: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.queried_tokens if self.queried_tokens else 0.0


class BlockAllocator:
    """Hands out KV blocks to requests and takes them back.

    ``windows`` has one entry per KV cache group (``model/kv_layout.py``): the layers of a
    group share a block table; a group of sliding-window layers (an int: the keys a query
    sees) keeps only the blocks its window can still reach and gives the older ones back,
    leaving ``NO_BLOCK`` in their place. All groups draw from the one pool, so a long context
    costs the full-attention groups' blocks plus a window's worth per windowed group.

    ``state_slots``: a hybrid model's recurrent state slots, which follow the blocks: taken with a
    request's first blocks, given back with them, a prefix hit only where a checkpoint
    holds the state after it (``state_cache.py``).
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        windows: Sequence[int | None] = (None,),
        state_slots: int = 0,
    ):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.windows = tuple(windows)
        self._ref_cnt = [0] * num_blocks
        self._hash: list[bytes | None] = [None] * num_blocks
        self._group = [0] * num_blocks  # the group whose map names the block
        self._cached: list[dict[bytes, int]] = [{} for _ in self.windows]
        # Blocks with no reference, oldest first; popping from the front reuses them LRU.
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self._owned: dict[Request, list[list[int]]] = {}
        self.stats = PrefixCacheStats()
        self.states = (
            StateCache(state_slots, block_size, enable_prefix_caching) if state_slots else None
        )

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

    def update_block_hashes(self, request: Request) -> None:
        """Extend ``request.block_hashes`` over every full block of its known tokens."""
        if not self.enable_prefix_caching:
            return
        hashes = request.block_hashes
        bs = self.block_size
        for i in range(len(hashes), request.num_tokens // bs):
            start, end = i * bs, (i + 1) * bs
            parent = hashes[-1] if hashes else request.cache_salt
            extra = request.block_extra_key(start, end) if request.placeholders else b""
            hashes.append(hash_block(parent, request.tokens(start, end), extra))

    def find_cached(self, request: Request) -> list[list[int]]:
        """Per group, the cached blocks of the longest prefix of the request's tokens that
        every group can resume from: a full group needs all of the prefix's blocks, a
        windowed one those of the window before its end (``NO_BLOCK`` before them).

        At least one token is always left to compute: its logits are what the step is for.
        """
        none: list[list[int]] = [[] for _ in self.windows]
        if not self.enable_prefix_caching:
            return none
        self.update_block_hashes(request)
        hashes = request.block_hashes[: (request.num_tokens - 1) // self.block_size]
        self.stats.queried_tokens += request.num_tokens
        hit = len(hashes)
        for cached, window in zip(self._cached, self.windows):
            if window is None:
                hit = next((i for i, h in enumerate(hashes[:hit]) if h not in cached), hit)
        while True:  # each windowed group may cut the hit; a shorter one may not suit another
            cut = min(
                (self._window_hit(g, hashes, hit) for g, w in enumerate(self.windows) if w),
                default=hit,
            )
            if self.states is not None:
                cut = self.states.resumable(hashes, cut)
            if cut == hit:
                break
            hit = cut
        if hit == 0:
            return none
        self.stats.hit_tokens += hit * self.block_size
        return [
            [NO_BLOCK] * (first := self._first_kept(g, hit * self.block_size))
            + [cached[h] for h in hashes[first:hit]]
            for g, cached in enumerate(self._cached)
        ]

    def _first_kept(self, group: int, position: int) -> int:
        """The first block a query at ``position`` of ``group``'s layers still reads."""
        window = self.windows[group]
        return 0 if window is None else max(0, position - window + 1) // self.block_size

    def _window_hit(self, group: int, hashes: list[bytes], hit: int) -> int:
        """The longest prefix of at most ``hit`` blocks whose window ``group`` holds."""
        cached = self._cached[group]
        missing = -1  # the last block before ``end`` that the group lacks
        last_miss = []
        for i in range(hit):
            last_miss.append(missing)
            if hashes[i] not in cached:
                missing = i
        last_miss.append(missing)
        for end in range(hit, 0, -1):
            if last_miss[end] < self._first_kept(group, end * self.block_size):
                return end
        return 0

    def allocate(
        self, request: Request, num_new_tokens: int, cached: Sequence[Sequence[int]] = ()
    ) -> bool:
        """Give ``request`` room for ``num_new_tokens`` more tokens after its computed ones.

        ``cached`` are the blocks per group from :meth:`find_cached` to take first. A
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
                self._pass_window(owned[g], self._first_kept(g, start))
        total = -(-end // self.block_size)
        needed = [total - len(o) - len(c) for o, c in zip(owned, taken)]
        if not cached and max(needed) <= 0:  # most decode steps: the last block has room
            self._register_full_blocks(request, owned, end)
            self._plan_state(request, start, end, 0)
            return True
        revived = sum(1 for c in taken for b in c if b != NO_BLOCK and self._ref_cnt[b] == 0)
        if sum(max(n, 0) for n in needed) + revived > len(self._free):
            return False
        for block in (b for c in taken for b in c if b != NO_BLOCK):
            if self._ref_cnt[block] == 0:
                del self._free[block]
            self._ref_cnt[block] += 1
        for g in range(len(self.windows)):
            owned[g] += taken[g] + [self._take_free() for _ in range(max(needed[g], 0))]
        self._owned[request] = owned
        self._register_full_blocks(request, owned, end)
        self._plan_state(request, start, end, len(taken[0]))
        return True

    def _plan_state(self, request: Request, start: int, end: int, hit: int) -> None:
        if self.states is not None:
            resume = request.block_hashes[hit - 1] if hit else None
            self.states.plan(request, start, end, resume)

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
            if self._hash[block] is None:
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
                self._unname(block)

    def reset_prefix_cache(self) -> int:
        """Forget the prefix of every block no request holds (vLLM's ``reset_prefix_cache``:
        later prompts recompute what they would have found); blocks in use keep theirs, so a
        live request's named blocks stay a prefix of its blocks. Returns how many."""
        named = [block for block in self._free if self._hash[block] is not None]
        for block in named:
            self._unname(block)
        if self.states is not None:
            self.states.reset()
        return len(named)

    def _take_free(self) -> int:
        block, _ = self._free.popitem(last=False)
        self._unname(block)
        self._ref_cnt[block] = 1
        return block

    def _unname(self, block: int) -> None:
        h = self._hash[block]
        if h is not None:
            self._hash[block] = None
            cached = self._cached[self._group[block]]
            if cached.get(h) == block:
                del cached[h]
                if self.states is not None:
                    self.states.drop(h)

    def _register_full_blocks(self, request: Request, owned: list[list[int]], end: int) -> None:
        # Blocks are named as soon as the step that fills them is scheduled: K/V are
        # written before attention reads them in every layer, so a request scheduled in
        # the same step (a sibling of n > 1) can already share them.
        if not self.enable_prefix_caching:
            return
        self.update_block_hashes(request)
        full = min(end // self.block_size, len(request.block_hashes))
        for g, blocks in enumerate(owned):
            # A live request's named blocks are a prefix of its blocks (a block is unnamed
            # only once nobody holds it), so walk back from the last full one to the first
            # named (or the first a window has passed).
            for i in reversed(range(full)):
                block = blocks[i]
                if block == NO_BLOCK or self._hash[block] is not None:
                    break
                h = request.block_hashes[i]
                self._hash[block] = h
                self._group[block] = g
                self._cached[g].setdefault(h, block)
