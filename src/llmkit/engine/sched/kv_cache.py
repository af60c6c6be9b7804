"""KV block allocator: reference counts, prefix caching by hash chain, LRU reuse. No torch.

A block holds ``block_size`` consecutive tokens of one sequence. A full block is named by
the hash of its tokens chained to the hash of the block before it, so two sequences with
the same prefix name the same blocks and can share them. A block whose reference count
drops to zero keeps its hash and stays findable until it is reused, least recently freed
first.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from llmkit.engine.sched.request import Request


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
    """Hands out KV blocks to requests and takes them back."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._ref_cnt = [0] * num_blocks
        self._hash: list[bytes | None] = [None] * num_blocks
        self._cached: dict[bytes, int] = {}
        # Blocks with no reference, oldest first; popping from the front reuses them LRU.
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self._owned: dict[Request, list[int]] = {}
        self.stats = PrefixCacheStats()

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def block_ids(self, request: Request) -> list[int]:
        return self._owned.get(request, [])

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

    def find_cached(self, request: Request) -> list[int]:
        """The longest run of cached blocks that starts the request's tokens.

        At least one token is always left to compute: its logits are what the step is for.
        """
        if not self.enable_prefix_caching:
            return []
        self.update_block_hashes(request)
        max_blocks = (request.num_tokens - 1) // self.block_size
        found = []
        for h in request.block_hashes[:max_blocks]:
            block = self._cached.get(h)
            if block is None:
                break
            found.append(block)
        self.stats.queried_tokens += request.num_tokens
        self.stats.hit_tokens += len(found) * self.block_size
        return found

    def allocate(self, request: Request, num_new_tokens: int, cached: Sequence[int] = ()) -> bool:
        """Give ``request`` room for ``num_new_tokens`` more tokens after its computed ones.

        ``cached`` are prefix blocks from :meth:`find_cached` to take first. Returns False
        (and changes nothing) when there are not enough free blocks.
        """
        owned = self._owned.get(request, [])
        end = request.num_computed_tokens + len(cached) * self.block_size + num_new_tokens
        needed = -(-end // self.block_size) - len(owned) - len(cached)
        if needed <= 0 and not cached:  # most decode steps: the last block has room
            self._register_full_blocks(request, owned, end)
            return True
        revived = sum(1 for b in cached if self._ref_cnt[b] == 0)
        if needed + revived > len(self._free):
            return False
        for block in cached:
            if self._ref_cnt[block] == 0:
                del self._free[block]
            self._ref_cnt[block] += 1
        new = [self._take_free() for _ in range(max(needed, 0))]
        owned = owned + list(cached) + new
        self._owned[request] = owned
        self._register_full_blocks(request, owned, end)
        return True

    def free(self, request: Request) -> None:
        """Drop the request's references; its tail blocks become the first to be reused."""
        for block in reversed(self._owned.pop(request, [])):
            self._ref_cnt[block] -= 1
            if self._ref_cnt[block] == 0:
                self._free[block] = None
                if self._hash[block] is None:
                    # Nothing to find in it: reuse it before any cached block.
                    self._free.move_to_end(block, last=False)

    def trim(self, request: Request, num_tokens: int) -> None:
        """Give back ``request``'s blocks past its first ``num_tokens`` tokens (rejected
        speculative tokens: never named, as only known tokens are hashed)."""
        owned = self._owned.get(request)
        keep = -(-num_tokens // self.block_size)
        if not owned or len(owned) <= keep:
            return
        for block in reversed(owned[keep:]):
            self._ref_cnt[block] -= 1
            if self._ref_cnt[block] == 0:
                self._free[block] = None
                self._free.move_to_end(block, last=False)
        del owned[keep:]

    def forget(self, request: Request) -> None:
        """Free the request and unname its blocks that nobody else holds (their KV is suspect)."""
        blocks = self._owned.get(request, [])
        self.free(request)
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
            if self._cached.get(h) == block:
                del self._cached[h]

    def _register_full_blocks(self, request: Request, owned: list[int], end: int) -> None:
        # Blocks are named as soon as the step that fills them is scheduled: K/V are
        # written before attention reads them in every layer, so a request scheduled in
        # the same step (a sibling of n > 1) can already share them.
        if not self.enable_prefix_caching:
            return
        self.update_block_hashes(request)
        # A live request's named blocks are a prefix of its blocks (a block is unnamed only
        # once nobody holds it), so walk back from the last full one to the first named.
        for i in reversed(range(min(end // self.block_size, len(request.block_hashes)))):
            block = owned[i]
            if self._hash[block] is not None:
                break
            h = request.block_hashes[i]
            self._hash[block] = h
            self._cached.setdefault(h, block)
