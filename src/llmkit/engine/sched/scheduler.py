"""Continuous batching: which requests run this step, and how many tokens each. No torch.

Each step spends a token budget (``max_num_batched_tokens``) and a sequence budget
(``max_num_seqs``). Running requests go first (decodes and the next chunks of long
prompts), then waiting ones by priority and arrival. When KV blocks run out the
lowest-priority, newest running request is preempted: its blocks are freed and it is
recomputed later from its prompt and the tokens it already produced.

With LoRA (``max_loras``), one step holds at most ``max_loras`` distinct adapters, as many
as the model has slots for; a request whose adapter does not fit waits for a later step.

For an encoder-only model (``encoder_only``) there are no KV blocks: each request attends
over its whole input at once, so it is scheduled whole in one step or not at all.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.tiers import Restore


@dataclass
class SchedulerOutput:
    """One step's work: the scheduled requests, in batch order, with their new token counts."""

    requests: list[Request] = field(default_factory=list)
    num_new_tokens: list[int] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    # Requests that cannot fit in the KV cache even alone: the engine fails them.
    unfit: list[Request] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return sum(self.num_new_tokens)

    def __bool__(self) -> bool:
        return bool(self.requests)


class Scheduler:
    def __init__(
        self,
        allocator: BlockAllocator,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        enable_chunked_prefill: bool = True,
        encoder_only: bool = False,
        max_loras: int = 0,
    ):
        self.allocator = allocator
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_chunked_prefill = enable_chunked_prefill
        self.encoder_only = encoder_only
        self.max_loras = max_loras  # 0: no adapters, no limit
        self.running: list[Request] = []
        # A heap by priority and arrival; finished entries stay until they reach the top.
        self._waiting: list[tuple[tuple, Request]] = []
        # The requests waiting now: counts come from membership, so finishing a request
        # twice, or one never added, can never make them drift.
        self._queued: set[Request] = set()

    @property
    def num_waiting(self) -> int:
        return len(self._queued)

    @property
    def num_running(self) -> int:
        return len(self.running)

    def has_work(self) -> bool:
        return bool(self.running) or bool(self._queued)

    def add(self, request: Request) -> None:
        assert request not in self._queued and not request.is_finished, request.request_id
        heapq.heappush(self._waiting, (request.sort_key(), request))
        self._queued.add(request)

    def finish(self, request: Request, status: RequestStatus) -> None:
        """End ``request`` (stopped, length, aborted, failed) and free its blocks."""
        if request.is_finished:
            return
        if request in self._queued:
            self._queued.remove(request)  # its heap entry is skipped when reached
        else:
            assert request in self.running, f"{request.request_id} is not in the scheduler"
            self.running.remove(request)
        request.set_status(status)
        if status is RequestStatus.FINISHED_ERROR:
            self.allocator.forget(request)
        else:
            self.allocator.free(request)

    def advance(self, out: SchedulerOutput) -> list[Request]:
        """Count a finished step's tokens as computed; returns the generation requests that
        are now wholly computed, which sample their next token from this step."""
        if self.allocator.states is not None:
            self.allocator.states.commit()
        sampling = []
        for req, n in zip(out.requests, out.num_new_tokens):
            req.num_computed_tokens += n
            if not req.is_pooling and req.num_computed_tokens == req.num_tokens_with_spec:
                sampling.append(req)
        return sampling

    def reject_drafts(self, request: Request, num_rejected: int) -> None:
        """Forget the KV of ``request``'s last ``num_rejected`` proposals, which the model
        refused, and give back the blocks that held only them."""
        request.spec_token_ids.clear()
        request.num_computed_tokens -= num_rejected
        self.allocator.trim(request, request.num_computed_tokens)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        scheduled: set[Request] = set()
        loras: set[int] = set()  # the adapters in this step

        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            num_new = min(req.num_tokens_with_spec - req.num_computed_tokens, budget)
            # Proposals past the budget are dropped; the ones that fit are still checked.
            del req.spec_token_ids[max(num_new - req.num_tokens + req.num_computed_tokens, 0) :]
            if num_new <= 0 or req.length_reached_in_flight or not self._lora_fits(req, loras):
                i += 1
                continue
            while not self._reserve(req, num_new):
                if req.spec_token_ids:  # proposals are never worth a preemption
                    num_new -= len(req.spec_token_ids)
                    req.spec_token_ids.clear()
                    continue
                if len(self.running) == 1:  # alone, and still no room: never will be
                    out.unfit.append(req)
                    i += 1
                    break
                victim = max(self.running, key=Request.sort_key)
                budget += self._preempt(victim, out, scheduled)
                if victim is req:
                    break
                i = self.running.index(req)
            else:
                out.requests.append(req)
                out.num_new_tokens.append(num_new)
                scheduled.add(req)
                budget -= num_new
                i += 1

        if out.preempted:
            return out  # no admissions in a step that had to preempt
        passed: list[tuple[tuple, Request]] = []  # waiting requests whose adapter did not fit
        while budget > 0 and len(self.running) < self.max_num_seqs:
            waiting = self._peek_waiting()
            if waiting is None:
                break
            req = waiting
            if not self._lora_fits(req, loras):
                passed.append(heapq.heappop(self._waiting))
                continue
            skip_cache = req.skip_prefix_cache or self.encoder_only
            cached = [] if skip_cache else self.allocator.find_cached(req)
            num_computed = len(cached[0]) * self.allocator.block_size if cached else 0
            num_new = req.num_tokens - num_computed
            if num_new > budget:
                if not self.enable_chunked_prefill or self.encoder_only:
                    break
                num_new = budget
            if not self._reserve(req, num_new, cached):
                if not self.running:  # every block is free, and still no room
                    out.unfit.append(heapq.heappop(self._waiting)[1])
                    continue
                break
            heapq.heappop(self._waiting)
            self._queued.remove(req)
            req.set_status(RequestStatus.RUNNING)
            req.num_computed_tokens = num_computed
            if req.num_cached_tokens < 0:
                req.num_cached_tokens = num_computed
            self.running.append(req)
            out.requests.append(req)
            out.num_new_tokens.append(num_new)
            budget -= num_new
        for entry in passed:
            heapq.heappush(self._waiting, entry)
        return out

    def unfit_error(self) -> str:
        """What a request that cannot fit in the KV cache fails with."""
        blocks = self.allocator.num_blocks
        return (
            f"the request needs more KV cache than the engine holds ({blocks} blocks of "
            f"{self.allocator.block_size} tokens); shorten it, or give the KV cache more memory"
        )

    def _lora_fits(self, req: Request, loras: set[int]) -> bool:
        """Whether ``req``'s adapter can join the step's (and, if so, counts it in)."""
        if not self.max_loras or not req.lora_id or req.lora_id in loras:
            return True
        if len(loras) >= self.max_loras:
            return False
        loras.add(req.lora_id)
        return True

    def _reserve(
        self, req: Request, num_new: int, cached: Sequence[Sequence[int | Restore]] = ()
    ) -> bool:
        return self.encoder_only or self.allocator.allocate(req, num_new, cached)

    def _peek_waiting(self) -> Request | None:
        while self._waiting and self._waiting[0][1].is_finished:
            heapq.heappop(self._waiting)
        return self._waiting[0][1] if self._waiting else None

    def _preempt(self, victim: Request, out: SchedulerOutput, scheduled: set[Request]) -> int:
        """Free ``victim`` for recompute; returns the budget it gives back."""
        self.running.remove(victim)
        refund = 0
        if victim in scheduled:
            # Its blocks were named for KV this step will no longer write.
            pos = out.requests.index(victim)
            out.requests.pop(pos)
            refund = out.num_new_tokens.pop(pos)
            scheduled.discard(victim)
            self.allocator.forget(victim)
        else:
            self.allocator.free(victim)
        victim.spec_token_ids.clear()
        victim.set_status(RequestStatus.PREEMPTED)
        victim.num_computed_tokens = 0
        victim.num_preemptions += 1
        out.preempted.append(victim)
        self.add(victim)
        return refund
