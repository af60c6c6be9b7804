"""The user requests the core holds: each one's sequences and their state, and how a
request ends (finished, aborted, failed), giving back what it held."""

from __future__ import annotations

import time

from llmkit.engine.core.encoder_cache import EncoderCache
from llmkit.engine.core.output_state import RequestState
from llmkit.engine.core.seq_state import SeqState
from llmkit.engine.sched.admission import AdmissionQueue
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.scheduler import Scheduler
from llmkit.errors import LLMKitError


def needs_host_tokens(req: Request) -> bool:
    """Whether sampling ``req`` reads its output tokens on the host: a grammar advanced by
    each token, penalties counted over them, or ``min_tokens`` counting them."""
    params = req.sampling_params
    if params is None:
        return False
    return req.matcher is not None or params.needs_penalties or params.min_tokens > 0


class RequestTable:
    def __init__(self, scheduler: Scheduler, queue: AdmissionQueue, encoder: EncoderCache):
        self.scheduler, self.queue, self.encoder = scheduler, queue, encoder
        self.requests: dict[str, list[Request]] = {}  # user request id -> its sequences
        self.seqs: dict[Request, SeqState] = {}
        # The user requests whose sampling needs each last token on the host (a grammar,
        # penalties, min_tokens): while one lives, no step runs ahead of its tokens.
        self.host_bound: set[str] = set()

    def __len__(self) -> int:
        return len(self.requests)

    def add(self, state: RequestState, requests: list[Request], seqs: list[SeqState]) -> None:
        """Hold ``requests`` (with ``seqs``, their states) and queue them for the scheduler."""
        self.requests[state.request_id] = requests
        if any(needs_host_tokens(req) for req in requests):
            self.host_bound.add(state.request_id)
        self.queue.enter(state.request_id, requests[0].arrival_time, len(state.prompt_token_ids))
        for req, seq in zip(requests, seqs):
            self.seqs[req] = seq
            self.scheduler.add(req)

    def state(self, request_id: str) -> RequestState | None:
        requests = self.requests.get(request_id)
        return self.seqs[requests[0]].state if requests else None

    def fail(self, requests: list[Request], error: str | LLMKitError) -> list[RequestState]:
        """End the user requests of ``requests`` with ``error``; a message fails them as
        failed steps. Returns their states."""
        seqs = [seq for r in requests if (seq := self.seqs.get(r)) is not None]
        failed = {seq.state.request_id: seq.state for seq in seqs}
        for state in failed.values():
            with state.lock:
                state.error = str(error)
                state.failure = error if isinstance(error, LLMKitError) else None
            self.end(state, RequestStatus.FINISHED_ERROR)
        return list(failed.values())

    def expire_waiting(self, limit: float | None) -> list[RequestState]:
        """Fail the requests that waited longer than ``limit`` seconds for a first step."""
        overdue = self.queue.overdue(limit, time.monotonic()) if limit else []
        return [s for rid, exc in overdue for s in self.fail(self.requests[rid][:1], exc)]

    def end(self, state: RequestState, status: RequestStatus) -> None:
        """End every sequence of ``state``'s request still running with ``status``."""
        for req in self.requests.get(state.request_id, []):
            if not req.is_finished:
                self.scheduler.finish(req, status)
                with state.lock:
                    if not state.pooling:
                        state.completions[req.index].finish_reason = req.finish_reason
        self.forget(state)

    def forget(self, state: RequestState) -> None:
        """Let go of a request whose sequences have all finished."""
        self.queue.ended(state.request_id)
        self.host_bound.discard(state.request_id)
        for req in self.requests.pop(state.request_id, []):
            self.seqs.pop(req, None)
            self.encoder.free(req)
