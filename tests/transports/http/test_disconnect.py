"""Clients that leave abort their engine requests: nothing keeps running, nothing leaks,
and each is logged as one access line with status 499 (nginx's), never a traceback."""

from __future__ import annotations

import json
import socket
import struct
import time
from urllib.parse import urlsplit

import anyio
import openai
import pytest

from serve_helpers import metric_samples

MODEL = "tiny"
LONG = dict(max_tokens=240, extra_body={"ignore_eos": True})  # far longer than 0.5 s


def metrics(server) -> dict[str, float]:
    with server.http(api_key=None) as http:
        return metric_samples(http.get("/metrics").text)


def engine_load(server) -> dict[str, float]:
    wanted = (
        "llmkit:num_requests_running",
        "llmkit:num_requests_waiting",
        "llmkit:kv_cache_usage_perc",
    )
    return {name: value for name, value in metrics(server).items() if name in wanted}


def aborted(server) -> float:
    return metrics(server)['llmkit:request_success_total{finished_reason="abort"}']


def wait_idle(server, timeout: float = 10.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        load = engine_load(server)
        if not any(load.values()) or time.monotonic() > deadline:
            return load
        time.sleep(0.1)


@pytest.mark.anyio
async def test_200_streaming_clients_that_time_out_all_abort(server, async_client):
    aborted_before = aborted(server)
    timed_out = 0

    async def impatient_client(i: int) -> None:
        nonlocal timed_out
        stream = await async_client.completions.create(
            model=MODEL, prompt=f"request {i}", stream=True, **LONG
        )
        async with stream:  # leaving it closes the connection
            # The first chunk shows the engine has the request (on a loaded machine 200
            # connections take a while to be accepted); the client gives up 0.5 s later.
            await stream.__anext__()
            with anyio.move_on_after(0.5) as scope:
                async for _ in stream:
                    pass
        timed_out += scope.cancelled_caught

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(impatient_client, i)
    assert timed_out == 200

    assert wait_idle(server) == {
        "llmkit:num_requests_running": 0.0,
        "llmkit:num_requests_waiting": 0.0,
        "llmkit:kv_cache_usage_perc": 0.0,
    }
    assert aborted(server) - aborted_before == 200
    # The engine still serves (the random model may sample its end token, so it is ignored).
    result = await async_client.completions.create(
        model=MODEL, prompt="after", max_tokens=3, extra_body={"ignore_eos": True}
    )
    assert result.choices[0].finish_reason == "length"


@pytest.mark.anyio
async def test_non_streaming_clients_that_time_out_abort(server):
    aborted_before = aborted(server)
    failures = 0

    async def one(client: openai.AsyncOpenAI, i: int) -> None:
        nonlocal failures
        try:
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"hi {i}"}], n=4, **LONG
            )
        except openai.APITimeoutError:
            failures += 1

    async with (
        openai.AsyncOpenAI(
            base_url=server.base_url, api_key="test-key", max_retries=0, timeout=0.5
        ) as impatient,
        anyio.create_task_group() as tg,
    ):
        for i in range(50):
            tg.start_soon(one, impatient, i)
    assert failures == 50
    assert not any(wait_idle(server).values())
    assert aborted(server) - aborted_before == 50


@pytest.fixture(scope="module")
def logged_server(module_server, tiny_model):
    """A server of this module's that logs each request (the session's logs only warnings)."""
    return module_server(tiny_model, "--max-model-len", "2048")


def wait_for_line(server, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in server.log.read_text():
        assert time.monotonic() < deadline, f"{text!r} not logged in {timeout} s"
        time.sleep(0.02)
    return server.log.read_text()


@pytest.mark.parametrize("leaves", ["mid-body", "mid-stream", "before-the-answer"])
@pytest.mark.parametrize("reset", [False, True], ids=["close", "reset"])
def test_a_client_that_leaves_is_one_access_line_with_499(logged_server, leaves, reset):
    rid = f"{leaves}-{reset}"
    stream = leaves == "mid-stream"
    body = json.dumps({"prompt": "hi", "max_tokens": 2000, "ignore_eos": True, "stream": stream})
    sent = body[:10] if leaves == "mid-body" else body
    url = urlsplit(logged_server.url)
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(
            f"POST /v1/completions HTTP/1.1\r\nHost: {url.netloc}\r\nX-Request-Id: {rid}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{sent}".encode()
        )
        if leaves == "mid-body":
            time.sleep(0.2)  # for the server to read what came (a reset would drop it)
        elif stream:
            received = b""
            while b"data: " not in received:
                received += sock.recv(4096)
        else:
            wait_for_line(logged_server, f"request cmpl-{rid}:")
        if reset:  # the connection is reset rather than closed
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    log = wait_for_line(logged_server, f"request_id={rid}")
    lines = [line for line in log.splitlines() if f"request_id={rid}" in line]
    assert len(lines) == 1 and "POST /v1/completions 499 " in lines[0]
    assert "Traceback" not in log
