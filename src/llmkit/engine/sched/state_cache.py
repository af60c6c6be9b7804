"""Recurrent state slots beside the KV blocks, and their checkpoints kept with the prefix
cache. No torch.

A hybrid model's linear-attention layers (Gated DeltaNet) keep a fixed-size state per
sequence, a convolution window and a delta-rule matrix, instead of keys and values per
token. Each running request holds one *live* slot for its lifetime; it is zeroed when the
request starts from nothing.

The prefix cache can resume a request after ``h`` cached blocks only from the state at
exactly that point, so states are copied into *checkpoints* at two block boundaries, each
kept under the hash of the block it ends and dropped when that block's KV is reused (or,
least recently used first, when a slot is needed):

- the prompt's last block boundary before its final token: the longest hit a request with
  the same prompt can have (``n > 1`` run later, a regenerated answer);
- the last boundary a request's decode passed, held in a *trailing* slot of its own and
  kept when the request ends: a conversation's next turn, which repeats it, resumes there.

A checkpoint made in a step is findable only once that step has run (:meth:`commit`): a
request scheduled in the same step must not copy a state not yet written.

With the prompt cache's tiers (``tiers.py``), a checkpoint that leaves the pool goes below it
with its block (:attr:`dropped`, saved by the runner before the step), and a hit may end at a
checkpoint found there: it is loaded straight into the request's live slot (:attr:`loads`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from llmkit.engine.sched.request import Request
from llmkit.model.state_ops import NO_SLOT, StateOps


class StateCache:
    """Hands out ``num_slots`` state slots; ``block_size``: the KV cache's."""

    def __init__(self, num_slots: int, block_size: int, enable_prefix_caching: bool) -> None:
        self.num_slots = num_slots
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._free = list(range(num_slots - 1, -1, -1))  # popped from the end: 0 first
        self._live: dict[Request, int] = {}
        self._trailing: dict[Request, tuple[int, int]] = {}  # slot, the boundary it holds
        self._pending: dict[Request, tuple[int, int]] = {}  # slot, boundary: this step's
        self._checkpoints: OrderedDict[bytes, int] = OrderedDict()  # least recent first
        self._ops: dict[Request, StateOps] = {}
        # With tiers below the pool: whether they hold a checkpoint, the tokens of the block
        # each checkpoint ends (an entry's check), the checkpoints that left the pool since
        # the last step (hash, slot, tokens) and the states to load (slot, bytes).
        self.below: Callable[[bytes], bool] | None = None
        self._tokens: dict[bytes, tuple[int, ...]] = {}
        self.dropped: list[tuple[bytes, int, tuple[int, ...]]] = []
        self.loads: list[tuple[int, bytes]] = []

    @property
    def num_checkpoints(self) -> int:
        return len(self._checkpoints)

    @property
    def num_free_slots(self) -> int:
        return len(self._free)

    def resumable(self, hashes: list[bytes], hit: int) -> int:
        """The most blocks, at most ``hit``, after whose last a checkpoint holds the state."""
        while hit and not self.holds(hashes[hit - 1]):
            hit -= 1
        return hit

    def holds(self, block_hash: bytes, pool_only: bool = False) -> bool:
        """Whether a checkpoint after ``block_hash`` is in the pool (or, unless
        ``pool_only``, in a tier below it)."""
        if block_hash in self._checkpoints:
            return True
        return not pool_only and self.below is not None and self.below(block_hash)

    def plan(
        self,
        request: Request,
        start: int,
        end: int,
        resume: bytes | None,
        restore: bytes | None = None,
    ) -> None:
        """Record the step's work on ``request``'s state as it computes tokens ``start`` to
        ``end``; ``resume``: on its first step, the hash of the cached block it resumes after
        (``restore``: the state there, from a tier below the pool)."""
        init = None
        if request not in self._live:
            live = self._live[request] = self._take_live()
            if restore is not None:
                self.loads.append((live, restore))  # the runner loads it: no init
            else:
                init = NO_SLOT if resume is None else self._checkpoints[resume]
                if resume is not None:
                    self._checkpoints.move_to_end(resume)
        save_at, save_slot = -1, NO_SLOT
        if self.enable_prefix_caching:
            save_at, save_slot = self._save(request, start, end)
        self._ops[request] = StateOps(self._live[request], init, save_at, save_slot)

    def _save(self, request: Request, start: int, end: int) -> tuple[int, int]:
        """Where the step copies a checkpoint: (offset into its tokens, slot), or none."""
        bs = self.block_size
        prompt = (request.num_prompt_tokens - 1) // bs * bs
        if start < prompt <= end:
            if request.block_hashes[prompt // bs - 1] in self._checkpoints:
                return -1, NO_SLOT
            slot = self._take()
            if slot is None:
                return -1, NO_SLOT
            self._pending[request] = (slot, prompt)
            return prompt - start, slot
        boundary = end // bs * bs
        if boundary <= max(start, prompt):
            return -1, NO_SLOT
        held = self._trailing.get(request)
        slot = held[0] if held is not None else self._take()
        if slot is None:
            return -1, NO_SLOT
        self._trailing[request] = (slot, boundary)
        return boundary - start, slot

    def ops(self, request: Request) -> StateOps | None:
        """The step's work on ``request``'s state (once: the runner's input takes it)."""
        return self._ops.pop(request, None)

    def commit(self) -> None:
        """The step has run: its prompt checkpoints become findable."""
        for request, (slot, boundary) in self._pending.items():
            self._keep(request, slot, boundary)
        self._pending.clear()
        self._ops.clear()

    def release(self, request: Request, keep: bool) -> None:
        """``request`` holds no slot any more; ``keep``: its states are sound (it was not
        failed), so its trailing checkpoint stays findable."""
        self._ops.pop(request, None)
        live = self._live.pop(request, None)
        if live is not None:
            self._free.append(live)
        pending = self._pending.pop(request, None)
        if pending is not None:
            self._free.append(pending[0])
        trailing = self._trailing.pop(request, None)
        if trailing is not None:
            if keep:
                self._keep(request, *trailing)
            else:
                self._free.append(trailing[0])

    def drop(self, block_hash: bytes) -> None:
        """The block named ``block_hash`` is reused: the checkpoint after it leaves the pool."""
        slot = self._checkpoints.pop(block_hash, None)
        if slot is not None:
            self._left(block_hash, slot)
            self._free.append(slot)

    def reset(self) -> None:
        """Forget every checkpoint (the prefix cache was reset)."""
        self._free += self._checkpoints.values()
        self._checkpoints.clear()
        self._tokens.clear()
        self.dropped.clear()  # forgotten, not kept below the pool

    def checkpoints(self) -> list[tuple[bytes, int, tuple[int, ...]]]:
        """Every checkpoint in the pool (hash, slot, tokens): what a closing engine spills."""
        return [(h, slot, self._tokens.get(h, ())) for h, slot in self._checkpoints.items()]

    def _left(self, block_hash: bytes, slot: int) -> None:
        tokens = self._tokens.pop(block_hash, None)
        if self.below is not None and tokens is not None:
            self.dropped.append((block_hash, slot, tokens))

    def _keep(self, request: Request, slot: int, boundary: int) -> None:
        block_hash = request.block_hashes[boundary // self.block_size - 1]
        if block_hash in self._checkpoints:  # a sibling's, made from the same tokens
            self._free.append(slot)
        else:
            self._checkpoints[block_hash] = slot
            if self.below is not None:
                start = boundary - self.block_size
                self._tokens[block_hash] = tuple(request.tokens(start, boundary))

    def _take(self) -> int | None:
        """A free slot, else the least recently used checkpoint's; None when neither."""
        if self._free:
            return self._free.pop()
        if self._checkpoints:
            block_hash, slot = self._checkpoints.popitem(last=False)
            self._left(block_hash, slot)
            return slot
        return None

    def _take_live(self) -> int:
        slot = self._take()
        # The engine runs at most as many requests as there are live slots to give.
        assert slot is not None, "no recurrent state slot is left for a running request"
        return slot
