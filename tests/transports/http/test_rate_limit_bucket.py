"""RateLimitMiddleware's token bucket on a clock of the test's: refill, reset header, idle keys."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from llmkit.transports.http import limits as http_limits
from llmkit.transports.http.limits import RateLimitMiddleware, RateLimits

pytestmark = pytest.mark.anyio


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _app(clock: Clock) -> RateLimitMiddleware:
    async def ok(request):
        return Response("ok")

    inner = Starlette(routes=[Route("/work", ok, methods=["POST"])])
    limits = RateLimits(requests_per_second=2, burst=4)
    return RateLimitMiddleware(inner, limits, frozenset(), clock=clock)


async def test_the_bucket_refills_at_the_rate_and_says_when_it_is_full_again():
    clock = Clock()
    app = _app(clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://x") as http:
        statuses = [(await http.post("/work")).status_code for _ in range(5)]
        assert statuses == [200, 200, 200, 200, 429]
        refused = await http.post("/work")
        assert refused.headers["retry-after-ms"] == "500"  # one request's worth at 2/s
        assert refused.headers["x-ratelimit-remaining-requests"] == "0"
        assert refused.headers["x-ratelimit-reset-requests"] == "2s"  # 4 requests at 2/s
        clock.now += 1.0
        again = [(await http.post("/work")).status_code for _ in range(3)]
        assert again == [200, 200, 429]


async def test_idle_keys_are_forgotten_when_the_table_is_full(monkeypatch):
    monkeypatch.setattr(http_limits, "_MAX_KEYS", 3)
    clock = Clock()
    app = _app(clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://x") as http:
        for key in ("a", "b", "c"):
            await http.post("/work", headers={"Authorization": f"Bearer {key}"})
        clock.now += 10  # every bucket is full again
        await http.post("/work", headers={"Authorization": "Bearer d"})
    assert list(app._keys) == ["d"]
