"""Per-key rate limits against a real server: 429s go to the key over its limit and never to
another, headers on every response, and the official openai client backs off and succeeds."""

from __future__ import annotations

import asyncio
import hashlib

import httpx
import openai
import pytest

pytestmark = pytest.mark.anyio

KEYS = ["key-a", "key-b", "key-c", "key-d"]
CONCURRENT, RATE, BURST = 2, 5, 5


@pytest.fixture(scope="module")
def server(module_server, tiny_model):
    flags = [flag for key in KEYS for flag in ("--api-key", key)]
    return module_server(
        tiny_model,
        *flags,
        "--served-model-name",
        "tiny",
        "--rate-limit-concurrency",
        str(CONCURRENT),
        "--rate-limit-rps",
        str(RATE),
        "--rate-limit-burst",
        str(BURST),
        "--max-model-len",
        "512",
        "--log-level",
        "warning",
    )


def _client(server, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


def _completion(max_tokens: int) -> dict:
    return {"prompt": "limits", "max_tokens": max_tokens, "min_tokens": max_tokens}


def _assert_rate_limited(response: httpx.Response) -> None:
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert set(error) == {"message", "type", "param", "code"}
    assert int(response.headers["retry-after"]) >= 1
    assert int(response.headers["retry-after-ms"]) > 0


async def test_concurrency_limit_refuses_only_the_key_over_it(server):
    async with _client(server, "key-a") as a, _client(server, "key-b") as b:
        burst = [a.post("/v1/completions", json=_completion(200)) for _ in range(4)]
        others = [b.post("/v1/completions", json=_completion(200)) for _ in range(CONCURRENT)]
        results = await asyncio.gather(*burst, *others)
    mine, theirs = results[:4], results[4:]
    assert [r.status_code for r in theirs] == [200] * CONCURRENT
    assert sorted(r.status_code for r in mine) == [200, 200, 429, 429]
    for response in mine:
        if response.status_code == 429:
            _assert_rate_limited(response)
            assert "in flight" in response.json()["error"]["message"]


async def test_request_rate_limit_and_headers_on_every_response(server):
    async with _client(server, "key-c") as c, _client(server, "key-b") as b:
        responses = [await c.post("/v1/completions", json=_completion(1)) for _ in range(12)]
        # Another key, at the same moment, is untouched.
        other = [await b.post("/v1/completions", json=_completion(1)) for _ in range(3)]
        models = await c.get("/v1/models")
    statuses = [r.status_code for r in responses]
    assert statuses[:BURST] == [200] * BURST
    assert 429 in statuses
    for response in responses:
        if response.status_code == 429:
            _assert_rate_limited(response)
    assert [r.status_code for r in other] == [200] * 3
    for response in [*responses, *other, models]:
        assert response.headers["x-ratelimit-limit-requests"] == str(BURST)
        assert 0 <= int(response.headers["x-ratelimit-remaining-requests"]) <= BURST
        assert response.headers["x-ratelimit-reset-requests"].endswith("s")
    remaining = [int(r.headers["x-ratelimit-remaining-requests"]) for r in responses[:BURST]]
    assert remaining == sorted(remaining, reverse=True)


async def test_the_openai_client_retries_until_all_its_requests_succeed(server):
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="key-d", max_retries=30
    ) as client:
        results = await asyncio.gather(
            *(
                client.completions.create(
                    model="tiny", prompt=f"retry {i}", max_tokens=4, extra_body={"ignore_eos": True}
                )
                for i in range(12)
            )
        )
    assert [r.usage.completion_tokens for r in results] == [4] * 12
    async with httpx.AsyncClient(base_url=server.url) as http:
        metrics = (await http.get("/metrics")).text
    key_id = hashlib.sha256(b"key-d").hexdigest()[:8]
    hits = [
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith(f'llmkit:rate_limit_hits_total{{key="{key_id}"')
    ]
    assert sum(hits) > 0  # the client did meet the limits, and retried through them
    assert "key-d" not in metrics
