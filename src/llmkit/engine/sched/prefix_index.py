"""The prefix cache's names: which pool block holds which chained block hash, per KV cache
group, and the tiers below the pool. No torch.

A full block is named by the hash of its tokens chained to the hash of the block before it,
so two sequences with the same prefix name the same blocks and can share them. A block
keeps its name while nobody holds it, findable until the pool reuses it; then, with tiers,
its bytes go below the pool (a save the runner makes before the step) and a later lookup can
find them there (a :class:`Restore`, loaded into a fresh block).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from llmkit.engine.sched.request import Request
from llmkit.engine.sched.state_cache import StateCache
from llmkit.engine.sched.tiers import POOL, STATE_GROUP, ModelTiers, Restore, TierStats

NO_BLOCK = -1  # a windowed group's table entry for a block its window has passed


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


@dataclass
class BlockMoves:
    """Copies between the pool and the tiers, made before a step's forward: every save
    first (it reads a block that a load or the step then overwrites), then the loads."""

    saves: list[tuple[int, int, bytes, tuple[int, ...]]] = field(default_factory=list)
    loads: list[tuple[int, int, bytes]] = field(default_factory=list)  # group, block, bytes

    def __bool__(self) -> bool:
        return bool(self.saves or self.loads)


Found = list[list[int | Restore]]  # per group, a hit's blocks


class PrefixIndex:
    """The names of ``num_blocks`` pool blocks in the groups of ``windows``; ``states``: a
    hybrid's checkpoints, which a hit must end at; ``tiers``: the tiers below the pool."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        windows: tuple[int | None, ...],
        states: StateCache | None,
        tiers: ModelTiers | None,
    ):
        self.block_size = block_size
        self.windows = windows
        self.states = states
        self.tiers = tiers
        self._hash: list[bytes | None] = [None] * num_blocks
        self._group = [0] * num_blocks  # the group whose map names the block
        self._cached: list[dict[bytes, int]] = [{} for _ in windows]
        self._tokens: list[tuple[int, ...]] = [()] * num_blocks if tiers else []
        self.stats = PrefixCacheStats()
        self.tier_stats = TierStats()
        self.moves = BlockMoves()
        # The state a hit of the last lookup ends at, found below the pool (a hybrid's).
        self._state_found: tuple[Request, Restore] | None = None
        if states is not None and tiers is not None:
            states.below = lambda block_hash: tiers.contains(STATE_GROUP, block_hash)

    def update_hashes(self, request: Request) -> None:
        """Extend ``request.block_hashes`` over every full block of its known tokens."""
        hashes = request.block_hashes
        bs = self.block_size
        for i in range(len(hashes), request.num_tokens // bs):
            start, end = i * bs, (i + 1) * bs
            parent = hashes[-1] if hashes else request.cache_salt
            extra = request.block_extra_key(start, end) if request.placeholders else b""
            hashes.append(hash_block(parent, request.tokens(start, end), extra))

    def find(self, request: Request) -> Found:
        """Per group, the blocks of the longest prefix of the request's tokens that every
        group can resume from: a full group needs all of the prefix's blocks, a windowed one
        those of the window before its end (``NO_BLOCK`` before them). A block the pool
        lacks but a tier below holds is a :class:`Restore`.

        At least one token is always left to compute: its logits are what the step is for.
        """
        self.update_hashes(request)
        hashes = request.block_hashes[: (request.num_tokens - 1) // self.block_size]
        self.stats.queried_tokens += request.num_tokens
        found: Found | None = None
        while found is None:  # a tier's entry that fails its checks is gone the next time
            hit = self._longest_hit(hashes)
            found = self._collect(request, hashes, hit)
        self.stats.hit_tokens += hit * self.block_size
        if self.tiers is not None:  # counted in a whole-context group, where there is one
            g = next((g for g, w in enumerate(self.windows) if w is None), 0)
            tiers = Counter(POOL if isinstance(b, int) else b.tier for b in found[g])
            self.tier_stats.count(
                request.num_tokens, {t: n * self.block_size for t, n in tiers.items()}
            )
        return found

    def first_kept(self, group: int, position: int) -> int:
        """The first block a query at ``position`` of ``group``'s layers still reads."""
        window = self.windows[group]
        return 0 if window is None else max(0, position - window + 1) // self.block_size

    def _has(self, group: int, key: bytes) -> bool:
        if key in self._cached[group]:
            return True
        return self.tiers is not None and self.tiers.contains(group, key)

    def _longest_hit(self, hashes: list[bytes]) -> int:
        hit = len(hashes)
        for g, window in enumerate(self.windows):
            if window is None:
                hit = next((i for i, h in enumerate(hashes[:hit]) if not self._has(g, h)), hit)
        while True:  # each windowed group may cut the hit; a shorter one may not suit another
            cut = min(
                (self._window_hit(g, hashes, hit) for g, w in enumerate(self.windows) if w),
                default=hit,
            )
            if self.states is not None:
                cut = self.states.resumable(hashes, cut)
            if cut == hit:
                return hit
            hit = cut

    def _window_hit(self, group: int, hashes: list[bytes], hit: int) -> int:
        """The longest prefix of at most ``hit`` blocks whose window ``group`` holds."""
        missing = -1  # the last block before ``end`` that the group lacks
        last_miss = []
        for i in range(hit):
            last_miss.append(missing)
            if not self._has(group, hashes[i]):
                missing = i
        last_miss.append(missing)
        for end in range(hit, 0, -1):
            if last_miss[end] < self.first_kept(group, end * self.block_size):
                return end
        return 0

    def _collect(self, request: Request, hashes: list[bytes], hit: int) -> Found | None:
        """The blocks of a hit of ``hit`` blocks, per group; None if a tier's entry failed
        its checks (it is gone then: the caller looks again)."""
        found: Found = [[] for _ in self.windows]
        self._state_found = None
        if hit == 0:
            return found
        bs = self.block_size
        if self.states is not None and not self.states.holds(hashes[hit - 1], pool_only=True):
            assert self.tiers is not None
            tokens = tuple(request.tokens((hit - 1) * bs, hit * bs))
            state = self.tiers.fetch(STATE_GROUP, hashes[hit - 1], tokens)
            if state is None:
                return None
            self._state_found = (request, state)
        for g, cached in enumerate(self._cached):
            first = self.first_kept(g, hit * bs)
            found[g] = [NO_BLOCK] * first
            for i in range(first, hit):
                block = cached.get(hashes[i])
                if block is None:
                    assert self.tiers is not None
                    tokens = tuple(request.tokens(i * bs, (i + 1) * bs))
                    restore = self.tiers.fetch(g, hashes[i], tokens)
                    if restore is None:
                        return None
                    found[g].append(restore)
                else:
                    found[g].append(block)
        return found

    def state_restore(self, request: Request) -> bytes | None:
        """The state ``request``'s hit resumes from, if the last lookup found it below the
        pool (taken: one request's allocation uses it)."""
        found, self._state_found = self._state_found, None
        return found[1].payload if found is not None and found[0] is request else None

    # ---- naming blocks -------------------------------------------------------------

    def is_named(self, block: int) -> bool:
        return self._hash[block] is not None

    def name(self, request: Request, group: int, block: int, index: int) -> None:
        """Name ``block`` for the request's block ``index`` (its K/V written this step)."""
        bs = self.block_size
        tokens = tuple(request.tokens(index * bs, (index + 1) * bs)) if self.tiers else ()
        self._name(block, group, request.block_hashes[index], tokens)

    def restore(self, group: int, block: int, restore: Restore) -> None:
        """Name ``block`` for ``restore``, whose bytes are copied in before the step runs."""
        self._name(block, group, restore.key, restore.tokens)
        self.moves.loads.append((group, block, restore.payload))

    def _name(self, block: int, group: int, key: bytes, tokens: tuple[int, ...]) -> None:
        self._hash[block] = key
        self._group[block] = group
        self._cached[group].setdefault(key, block)
        if self.tiers is not None:
            self._tokens[block] = tokens

    def reuse(self, block: int) -> None:
        """The pool reuses ``block``: its name goes, and its bytes to the tiers."""
        h = self._hash[block]
        if self.tiers is not None and h is not None:
            g = self._group[block]
            if self._cached[g].get(h) == block and not self.tiers.contains(g, h):
                self.moves.saves.append((g, block, h, self._tokens[block]))
        self.unname(block)

    def unname(self, block: int) -> None:
        h = self._hash[block]
        if h is not None:
            self._hash[block] = None
            cached = self._cached[self._group[block]]
            if cached.get(h) == block:
                del cached[h]
                if self.states is not None:
                    self.states.drop(h)

    def reset(self, free: Sequence[int]) -> int:
        """Unname the ``free`` blocks and empty the tiers; returns how many were named."""
        named = [block for block in free if self._hash[block] is not None]
        for block in named:
            self.unname(block)
        if self.states is not None:
            self.states.reset()
        if self.tiers is not None:
            self.tiers.clear()
        return len(named)

    def spill(self) -> BlockMoves:
        """Saves of every named block the tiers lack (the engine is closing)."""
        tiers = self.tiers
        assert tiers is not None
        saves = [
            (g, block, h, self._tokens[block])
            for g, cached in enumerate(self._cached)
            for h, block in cached.items()
            if not tiers.contains(g, h)
        ]
        if self.states is not None:
            saves += [
                (STATE_GROUP, slot, h, tokens)
                for h, slot, tokens in self.states.checkpoints()
                if tokens and not tiers.contains(STATE_GROUP, h)
            ]
        return BlockMoves(saves)

    def take_moves(self) -> BlockMoves:
        """The copies planned since the last call: the runner makes them before the step."""
        moves, self.moves = self.moves, BlockMoves()
        states, tiers = self.states, self.tiers
        if states is not None and tiers is not None:
            moves.saves += [
                (STATE_GROUP, slot, h, tokens)
                for h, slot, tokens in states.dropped
                if not tiers.contains(STATE_GROUP, h)
            ]
            moves.loads += [(STATE_GROUP, slot, payload) for slot, payload in states.loads]
            states.dropped.clear()
            states.loads.clear()
        return moves
