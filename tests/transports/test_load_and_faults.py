"""Load and faults: 1,000 concurrent streams on the tiny model, 30% of the clients leaving at
random points. Afterwards nothing runs or waits, no KV block is held, every finished stream
equals its prompt's solo run (no stream got another's text), and the server is ready."""

from __future__ import annotations

import asyncio
import json
import random
import time

import httpx
import pytest

from serve_helpers import metric_samples

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CLIENTS, PROMPTS, TOKENS, LEAVING = 1000, 20, 6, 0.3


@pytest.fixture(scope="module")
def server(module_server, tiny_model):
    return module_server(
        tiny_model,
        "--max-num-seqs",
        "256",
        "--max-model-len",
        "128",
        "--max-num-batched-tokens",
        "4096",
        "--sse-keepalive-s",
        "0",
        "--disable-uvicorn-access-log",
        "--log-level",
        "warning",
    )


def _body(k: int, stream: bool) -> dict:
    prompt = f"client {k}: " + "more words " * (k % 5)
    return {
        "prompt": prompt,
        "max_tokens": TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "stream": stream,
    }


async def _engine_idle(http: httpx.AsyncClient, timeout: float = 60) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        samples = metric_samples((await http.get("/metrics")).text)
        values = {
            name: value
            for name, value in samples.items()
            if name.startswith(("llmkit:num_requests_", "llmkit:kv_cache_usage_perc"))
        }
        if not any(values.values()) or time.monotonic() > deadline:
            return values
        await asyncio.sleep(0.1)


async def test_a_thousand_streams_with_clients_leaving(server):
    rng = random.Random(14)
    # Prompts whose solo runs all differ, so a stream given another's text would show.
    solo: dict[int, str] = {}
    async with httpx.AsyncClient(base_url=server.url, timeout=300) as http:
        for k in range(5 * PROMPTS):
            response = await http.post("/v1/completions", json=_body(k, stream=False))
            text = response.json()["choices"][0]["text"]
            if text not in solo.values():
                solo[k] = text
            if len(solo) == PROMPTS:
                break
    prompts = list(solo)
    assert len(prompts) == PROMPTS

    # A fresh pool for the burst. Sharing the solo runs' pool (its idle keep-alive
    # connection reused by the first stream while the server's loop accepts 999 others)
    # failed about 1 run in 4 on a 2-core machine: an httpx.ReadError awaiting headers,
    # the server logging ClientDisconnect while reading bodies; likely a keep-alive
    # timeout firing under a request the busy loop had not read yet.
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=300) as http:

        async def client(i: int, leave_after: int | None) -> tuple[int, str | None]:
            text, finish = "", None
            async with http.stream(
                "POST", "/v1/completions", json=_body(prompts[i % PROMPTS], stream=True)
            ) as response:
                assert response.status_code == 200
                chunks = 0
                async for line in response.aiter_lines():
                    if leave_after is not None and chunks >= leave_after:
                        return i, None  # leaving closes the connection mid-stream
                    if line.startswith("data: {"):
                        chunks += 1
                        choice = json.loads(line[6:])["choices"][0]
                        text += choice["text"]
                        finish = choice["finish_reason"] or finish
            assert finish == "length"
            return i, text

        plan = [rng.randrange(TOKENS) if rng.random() < LEAVING else None for _ in range(CLIENTS)]
        start = time.perf_counter()
        results = await asyncio.gather(*(client(i, plan[i]) for i in range(CLIENTS)))
        elapsed = time.perf_counter() - start
        finished = [(i, text) for i, text in results if text is not None]
        print(
            f"{CLIENTS} streams, {CLIENTS - len(finished)} left early: {elapsed:.1f} s, "
            f"{len(finished) * TOKENS / elapsed:.0f} tokens/s delivered to finished streams"
        )
        # A client may reach the end before its leaving point (outputs coalesce into fewer
        # chunks); every client that meant to stay finished.
        assert len(finished) >= plan.count(None)
        assert CLIENTS - len(finished) >= CLIENTS * LEAVING / 2
        for i, text in finished:
            assert text == solo[prompts[i % PROMPTS]], f"stream {i} got another stream's text"
        idle = await _engine_idle(http)
        assert idle == {
            "llmkit:num_requests_running": 0,
            "llmkit:num_requests_waiting": 0,
            "llmkit:num_requests_queued": 0,
            "llmkit:kv_cache_usage_perc": 0,
        }
        assert (await http.get("/readyz")).status_code == 200
