"""Per-key rate limits for the HTTP app: concurrent requests and a token-bucket request rate.

Each API key (the ``Authorization: Bearer`` token; the client address when there is none)
gets its own bucket and in-flight count. A request over a limit is answered 429 with
OpenAI's ``rate_limit_exceeded`` error and ``Retry-After`` / ``retry-after-ms``, which the
official ``openai`` client honours when it retries. Every limited response carries
``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests`` and
``x-ratelimit-reset-requests``, as OpenAI's do.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llmkit.config.option import option
from llmkit.serving.errors import OpenAIError
from llmkit.transports.http.middleware import header, route_path, send_error

# A key at its concurrency limit learns to retry after this long: a slot frees when any
# of its requests ends, which the server cannot predict.
_CONCURRENCY_RETRY_S = 0.5
# Past this many keys tracked, idle ones (nothing in flight, bucket full) are forgotten, so
# clients without a key (one entry per address) cannot grow the table without bound.
_MAX_KEYS = 10_000


@dataclass(frozen=True)
class RateLimits:
    """The limits every API key gets; None turns a limit off.

    ``max_concurrent``: requests of one key in flight at once; ``requests_per_second``: the
    refill rate of the key's token bucket, which holds ``burst`` requests (default: one
    second's worth, at least 1; a burst needs a rate).
    """

    max_concurrent: int | None = option(
        None,
        name="--rate-limit-concurrency",
        group="limits",
        metavar="N",
        help="the most requests one API key may have in flight at once (default: no limit)",
    )
    requests_per_second: float | None = option(
        None,
        name="--rate-limit-rps",
        group="limits",
        metavar="RATE",
        help="the requests per second one API key may make, as a token bucket (default: no limit)",
    )
    burst: int | None = option(
        None,
        name="--rate-limit-burst",
        group="limits",
        metavar="N",
        help="the requests a key may make at once before --rate-limit-rps applies "
        "(default: one second's worth)",
    )

    def __post_init__(self) -> None:
        if self.burst is not None and self.requests_per_second is None:
            raise ValueError("burst needs requests_per_second")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")
        if self.requests_per_second is not None and not self.requests_per_second > 0:
            raise ValueError(f"requests_per_second must be > 0, got {self.requests_per_second}")
        if self.burst is not None and self.burst < 1:
            raise ValueError(f"burst must be >= 1, got {self.burst}")

    @property
    def enabled(self) -> bool:
        return self.max_concurrent is not None or self.requests_per_second is not None

    @property
    def capacity(self) -> int:
        """The bucket's size: ``burst``, or a second's worth of requests."""
        if self.burst is not None:
            return self.burst
        return max(1, math.ceil(self.requests_per_second or 1))


class _KeyState:
    __slots__ = ("in_flight", "level", "updated")

    def __init__(self, capacity: float, now: float):
        self.level = capacity  # requests the bucket holds now
        self.updated = now
        self.in_flight = 0


def key_id(key: str) -> str:
    """A short, stable id of a key for metrics and logs, which must never show the key."""
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``"1s"``, ``"0.25s"``, ``"6m0s"``."""
    if seconds < 60:
        return f"{round(seconds, 3):g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{round(rest):d}s"


class RateLimitMiddleware:
    """Applies :class:`RateLimits` to POST requests (the model work), per key.

    ``on_limit(key_id, limit)`` is called for each refusal (the metrics count them); the
    ``open_paths`` (health, metrics) are never limited.
    """

    def __init__(
        self,
        app: ASGIApp,
        limits: RateLimits,
        open_paths: frozenset[str],
        on_limit: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.app = app
        self._limits = limits
        self._open = open_paths
        self._on_limit = on_limit
        self._clock = clock
        self._keys: dict[str, _KeyState] = {}

    def _state(self, key: str, now: float) -> _KeyState:
        state = self._keys.get(key)
        if state is None:
            if len(self._keys) >= _MAX_KEYS:
                self._forget_idle(now)
            state = self._keys[key] = _KeyState(self._limits.capacity, now)
        rate = self._limits.requests_per_second
        if rate is not None:
            state.level = min(self._limits.capacity, state.level + (now - state.updated) * rate)
        state.updated = now
        return state

    def _forget_idle(self, now: float) -> None:
        rate = self._limits.requests_per_second or 0.0
        capacity = self._limits.capacity
        self._keys = {
            key: state
            for key, state in self._keys.items()
            if state.in_flight or state.level + (now - state.updated) * rate < capacity
        }

    def _headers(self, state: _KeyState) -> list[tuple[bytes, bytes]]:
        limits = self._limits
        if limits.requests_per_second is None:
            return []
        missing = limits.capacity - state.level
        reset = missing / limits.requests_per_second
        return [
            (b"x-ratelimit-limit-requests", str(limits.capacity).encode()),
            (b"x-ratelimit-remaining-requests", str(math.floor(state.level)).encode()),
            (b"x-ratelimit-reset-requests", _duration(reset).encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or route_path(scope) in self._open:
            await self.app(scope, receive, send)
            return
        auth = header(scope, b"authorization") or ""
        client = scope.get("client")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else f"addr:{client and client[0]}"
        key = header(scope, b"x-api-key") or key  # Anthropic's clients send their key so
        state = self._state(key, self._clock())
        if scope["method"] != "POST":
            await self._with_headers(scope, receive, send, state)
            return
        refusal = self._refusal(state)
        if refusal is not None:
            limit, error = refusal
            if self._on_limit is not None:
                self._on_limit(key_id(key), limit)
            await send_error(send, error, self._headers(state))
            return
        if self._limits.requests_per_second is not None:
            state.level -= 1
        state.in_flight += 1
        try:
            await self._with_headers(scope, receive, send, state)
        finally:
            state.in_flight -= 1

    def _refusal(self, state: _KeyState) -> tuple[str, OpenAIError] | None:
        limits = self._limits
        if limits.max_concurrent is not None and state.in_flight >= limits.max_concurrent:
            return "concurrency", OpenAIError(
                429,
                f"Rate limit reached: {state.in_flight} requests of this key are in flight "
                f"(limit {limits.max_concurrent}). Retry when one has finished.",
                None,
                "rate_limit_exceeded",
                retry_after_s=_CONCURRENCY_RETRY_S,
                error_type="requests",
            )
        rate = limits.requests_per_second
        if rate is not None and state.level < 1:
            return "requests", OpenAIError(
                429,
                f"Rate limit reached for requests: this key may make {rate:g} requests per "
                f"second (bursts of {limits.capacity}).",
                None,
                "rate_limit_exceeded",
                retry_after_s=(1 - state.level) / rate,
                error_type="requests",
            )
        return None

    async def _with_headers(
        self, scope: Scope, receive: Receive, send: Send, state: _KeyState
    ) -> None:
        extra = self._headers(state)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and extra:
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
