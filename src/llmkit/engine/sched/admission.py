"""Admission control: requests admitted but not yet run, their limits and waits. No torch.

The caller's thread reserves a place (refused with :class:`EngineOverloadedError` when the
queue is full) before the request reaches the core; the core thread releases it when the
request runs its first step or ends before that. Both sides share one lock.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

from llmkit.errors import EngineOverloadedError
from llmkit.types import EngineStats

# Upper bounds (seconds) of the queue wait histogram's buckets; the last is +Inf.
QUEUE_WAIT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_MIN_RETRY_S, _MAX_RETRY_S, _DEFAULT_RETRY_S = 0.1, 30.0, 1.0


def retry_after(wait_count: int, wait_sum: float) -> float:
    """A retry hint: the mean time requests have waited for their first step, bounded."""
    if not wait_count:
        return _DEFAULT_RETRY_S
    return min(max(wait_sum / wait_count, _MIN_RETRY_S), _MAX_RETRY_S)


def refusal(
    queued_requests: int,
    queued_tokens: int,
    new_tokens: int,
    max_requests: int | None,
    max_tokens: int | None,
    retry_after_s: float,
) -> EngineOverloadedError | None:
    """The error for one more request of ``new_tokens`` (0: not yet known), or None to admit.

    The token limit refuses once the waiting prompts reach it, and a prompt that would pass
    it unless nothing else waits (so one long prompt is never refused forever).
    """
    if max_requests is not None and queued_requests >= max_requests:
        return EngineOverloadedError(
            f"the engine is overloaded: {queued_requests} requests are waiting "
            f"(max_queued_requests={max_requests}); retry later",
            retry_after_s,
            "queued_requests",
        )
    if max_tokens is not None and (
        queued_tokens >= max_tokens or (queued_tokens and queued_tokens + new_tokens > max_tokens)
    ):
        return EngineOverloadedError(
            f"the engine is overloaded: {queued_tokens} prompt tokens are waiting "
            f"(max_queued_tokens={max_tokens}); retry later",
            retry_after_s,
            "queued_tokens",
        )
    return None


def stats_refusal(stats: EngineStats) -> EngineOverloadedError | None:
    """The refusal a new request meets by the queue an engine last reported (None: admit);
    for an engine elsewhere, which checks again when the request arrives."""
    hint = retry_after(stats.queue_wait_count, stats.queue_wait_sum)
    return refusal(
        stats.num_queued,
        stats.queued_tokens,
        0,
        stats.max_queued_requests,
        stats.max_queued_tokens,
        hint,
    )


class AdmissionQueue:
    """Counts what waits for its first step, refuses past the limits, and times the waits."""

    def __init__(self, max_requests: int | None, max_tokens: int | None):
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self.requests = 0
        self.tokens = 0
        self.wait_count = 0
        self.wait_sum = 0.0
        self._buckets = [0] * (len(QUEUE_WAIT_BUCKETS) + 1)
        # Core thread only: request id -> (arrival time, prompt tokens), in arrival order.
        self._unstarted: dict[str, tuple[float, int]] = {}

    def retry_after(self) -> float:
        return retry_after(self.wait_count, self.wait_sum)

    def check(self) -> None:
        """Raise EngineOverloadedError if a new request would be refused now."""
        error = self._refusal(0)
        if error is not None:
            raise error

    def reserve(self, tokens: int, refuse: bool = True) -> None:
        """Take a place for a request of ``tokens`` prompt tokens, or raise the refusal
        (``refuse=False``: take it past the limits, as an offline batch does)."""
        with self._lock:
            error = self._refusal(tokens) if refuse else None
            if error is not None:
                raise error
            self.requests += 1
            self.tokens += tokens

    def _refusal(self, tokens: int) -> EngineOverloadedError | None:
        return refusal(
            self.requests,
            self.tokens,
            tokens,
            self.max_requests,
            self.max_tokens,
            self.retry_after(),
        )

    def release(self, tokens: int, waited: float | None) -> None:
        """A reserved request started after ``waited`` seconds (None: it ended unstarted)."""
        with self._lock:
            self.requests -= 1
            self.tokens -= tokens
            if waited is not None:
                self.wait_count += 1
                self.wait_sum += waited
                self._buckets[bisect.bisect_left(QUEUE_WAIT_BUCKETS, waited)] += 1

    def wait_buckets(self) -> tuple[int, ...]:
        """Cumulative counts per bucket of QUEUE_WAIT_BUCKETS, then +Inf (Prometheus' way)."""
        total, out = 0, []
        for count in self._buckets:
            total += count
            out.append(total)
        return tuple(out)

    # ---- the core thread's side ------------------------------------------------------

    def enter(self, request_id: str, arrival: float, tokens: int) -> None:
        """A reserved request reached the core; it waits until :meth:`started` or :meth:`ended`."""
        self._unstarted[request_id] = (arrival, tokens)

    def started(self, request_id: str, now: float) -> None:
        """The request ran its first step (later calls for it change nothing)."""
        entry = self._unstarted.pop(request_id, None)
        if entry is not None:
            self.release(entry[1], now - entry[0])

    def ended(self, request_id: str) -> None:
        """The request ended; if it never ran, its place is free again."""
        entry = self._unstarted.pop(request_id, None)
        if entry is not None:
            self.release(entry[1], None)

    def overdue(self, limit: float, now: float) -> list[tuple[str, EngineOverloadedError]]:
        """The unstarted requests that have waited more than ``limit`` seconds, with the error
        to fail each with."""
        out = []
        # Entries are in arrival order, so the first one still in time ends the search.
        for request_id, (arrival, _) in self._unstarted.items():
            waited = now - arrival
            if waited <= limit:
                break
            message = (
                f"the engine is overloaded: the request waited {waited:.2f} s without being "
                f"scheduled (max_queue_wait_s={limit}); retry later"
            )
            out.append(
                (request_id, EngineOverloadedError(message, self.retry_after(), "queue_wait"))
            )
        return out

    def stats_fields(self) -> dict[str, Any]:
        """The admission fields of EngineStats."""
        return {
            "num_queued": self.requests,
            "queued_tokens": self.tokens,
            "max_queued_requests": self.max_requests,
            "max_queued_tokens": self.max_tokens,
            "queue_wait_count": self.wait_count,
            "queue_wait_sum": self.wait_sum,
            "queue_wait_buckets": self.wait_buckets(),
        }
