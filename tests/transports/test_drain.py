"""SIGTERM during 64 in-flight streams: readiness turns 503 at once, new work is refused,
and every stream finishes whole before the server exits, within --shutdown-timeout."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import httpx
import pytest

pytestmark = pytest.mark.anyio

STREAMS, TOKENS, SHUTDOWN_TIMEOUT = 64, 300, 60


async def test_sigterm_drains_in_flight_streams_and_refuses_new_work(start_server, tiny_model):
    proc, url = start_server(
        tiny_model,
        "--max-num-seqs",
        str(STREAMS),
        "--max-model-len",
        "512",
        "--shutdown-timeout",
        str(SHUTDOWN_TIMEOUT),
        "--log-level",
        "warning",
    )
    started = asyncio.Semaphore(0)
    limits = httpx.Limits(max_connections=STREAMS)

    async def stream(http: httpx.AsyncClient, i: int) -> tuple[int, bool, float]:
        body = {
            "prompt": f"drain {i}",
            "max_tokens": TOKENS,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tokens, done, first = 0, False, True
        async with http.stream("POST", "/v1/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    chunk = json.loads(line[6:])
                    assert "error" not in chunk
                    if chunk.get("usage"):
                        tokens = chunk["usage"]["completion_tokens"]
                    if first:
                        first = False
                        started.release()
        return tokens, done, time.monotonic()

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        tasks = [asyncio.create_task(stream(http, i)) for i in range(STREAMS)]
        for _ in range(STREAMS):
            await asyncio.wait_for(started.acquire(), 60)
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # New connections, as a load balancer's probe and a new client would make.
        async with httpx.AsyncClient(base_url=url, timeout=10) as fresh:
            ready = await fresh.get("/readyz")
            health = await fresh.get("/health")
            live = await fresh.get("/livez")
            refused = await fresh.post("/v1/completions", json={"prompt": "new", "max_tokens": 2})
        probed = time.monotonic()
        results = await asyncio.gather(*tasks)
    assert (ready.status_code, health.status_code, live.status_code) == (503, 503, 200)
    assert refused.status_code == 503
    assert "shutting down" in refused.json()["error"]["message"]
    assert all(done and tokens == TOKENS for tokens, done, _ in results)
    assert probed < max(end for _, _, end in results)  # the probes saw the drain itself
    assert proc.wait(SHUTDOWN_TIMEOUT) == 0
    assert time.monotonic() - signalled < SHUTDOWN_TIMEOUT
