"""SIGTERM during 64 in-flight streams: readiness turns 503 at once, new work is refused,
and every stream finishes whole before the server exits, within --shutdown-timeout. What
still runs at that deadline ends whole too, with the shutdown error, and the server exits
within a second of it."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from serve_helpers import metric

pytestmark = pytest.mark.anyio

STREAMS, TOKENS, SHUTDOWN_TIMEOUT = 64, 300, 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the streams run on asyncio (asyncio.gather, websockets' asyncio client)


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


DEADLINE = 2.0
ENDLESS = {"prompt": "on and on", "max_tokens": 2000, "ignore_eos": True}


async def test_what_runs_at_the_deadline_ends_with_the_shutdown_error_and_the_server_exits(
    module_server, tiny_model
):
    server = module_server(
        tiny_model, "--max-model-len", "2048", "--shutdown-timeout", str(DEADLINE)
    )
    ws_url = server.url.replace("http://", "ws://") + "/v1/ws"
    create = {"type": "completions.create", "id": "w", "body": ENDLESS}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http, connect(ws_url) as ws:
        answer = asyncio.create_task(http.post("/v1/completions", json=ENDLESS))
        await ws.send(json.dumps(create))
        async with http.stream(
            "POST", "/v1/completions", json={**ENDLESS, "stream": True}
        ) as stream:
            lines = stream.aiter_lines()
            assert (await anext(lines)).startswith("data: ")
            while metric((await http.get("/metrics")).text, "llmkit:num_requests_running") < 3:
                await asyncio.sleep(0.05)
            server.proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            events = [line async for line in lines if line]
        ended = time.monotonic() - signalled
        messages = [json.loads(await ws.recv())]
        while messages[-1]["type"] != "done":
            messages.append(json.loads(await ws.recv()))
        answered = await answer
    exit_code = await asyncio.to_thread(server.proc.wait, 30)
    exited = time.monotonic() - signalled

    # The stream ran on until the deadline, then ended whole: the error event, then [DONE].
    assert DEADLINE - 0.2 < ended < DEADLINE + 0.5
    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2][len("data: ") :])["error"]
    assert error["type"] == "service_unavailable" and "shutting down" in error["message"]
    assert all("error" not in json.loads(event[6:]) for event in events[:-2])
    # The request waiting for its whole answer got a 503, the WebSocket request its error.
    assert answered.status_code == 503
    assert answered.json()["error"] == error
    assert messages[-2] == {"type": "error", "id": "w", "error": error}
    assert messages[-1] == {"type": "done", "id": "w", "status": "failed"}
    assert exit_code == 0 and exited < DEADLINE + 1
    log = server.log.read_text()
    assert "POST /v1/completions 200" in log and "POST /v1/completions 503" in log
    assert "Traceback" not in log and "CancelledError" not in log
