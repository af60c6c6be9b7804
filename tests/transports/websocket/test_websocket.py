"""/v1/ws against a real `llmkit serve`: the `websockets` client, the openai client for HTTP."""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import msgpack
import openai
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as connect_sync

from deadlines import scaled
from hostile_values import HOSTILE_SETTINGS, values
from llmkit.transports.websocket.client import WebSocketClient, WebSocketError
from serve_helpers import metric

pytestmark = pytest.mark.anyio

API_KEY = "ws-test-key"
ORIGIN = "http://ui.example"
MAX_CONNECTIONS = 3
MAX_REQUESTS = 40
MAX_MESSAGE = 64 * 1024


@pytest.fixture(scope="module")
def ws_server(module_server, tiny_model) -> Any:
    return module_server(
        tiny_model,
        "--max-model-len",
        "256",
        "--served-model-name",
        "tiny",
        "--api-key",
        API_KEY,
        "--allowed-origins",
        ORIGIN,
        "--ws-max-connections",
        str(MAX_CONNECTIONS),
        "--ws-max-requests",
        str(MAX_REQUESTS),
        "--ws-max-message-bytes",
        str(MAX_MESSAGE),
        "--max-num-seqs",
        "48",
        "--log-level",
        "warning",
    )


def ws_url(server: Any) -> str:
    return server.url.replace("http://", "ws://") + "/v1/ws"


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}"}


async def raw(server: Any, **kwargs) -> ClientConnection:
    kwargs.setdefault("additional_headers", auth())
    return await connect(ws_url(server), **kwargs)


async def next_message(ws: ClientConnection, timeout: float = 30) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def until(ws: ClientConnection, kind: str, rid: str | None = None) -> dict:
    """Read messages until one of type ``kind`` (for request ``rid``) comes."""
    while True:
        message = await next_message(ws)
        if message["type"] == kind and (rid is None or message["id"] == rid):
            return message


def chat_body(i: int, max_tokens: int = 12) -> dict:
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": f"question number {i}"}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }


async def gauge(server: Any, name: str) -> float:
    async with httpx.AsyncClient(timeout=10) as http:
        return metric((await http.get(server.url + "/metrics")).text, name)


async def wait_idle(server: Any, timeout: float) -> float:
    """Seconds until no request runs or waits and no KV block is in use."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if (
            await gauge(server, "llmkit:num_requests_running") == 0
            and await gauge(server, "llmkit:num_requests_waiting") == 0
            and await gauge(server, "llmkit:kv_cache_usage_perc") == 0
        ):
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"requests still in the engine after {timeout} s")


@pytest.fixture
async def client(ws_server) -> AsyncIterator[WebSocketClient]:
    async with WebSocketClient(ws_url(ws_server), api_key=API_KEY) as ws_client:
        yield ws_client


async def collect_chat(stream) -> str:
    text = ""
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
    return text


async def test_32_concurrent_chats_on_one_connection_equal_http(ws_server, client):
    bodies = [chat_body(i, max_tokens=8 + i % 9) for i in range(32)]
    over_ws = await asyncio.gather(*(collect_chat(client.chat(**b)) for b in bodies))
    async with openai.AsyncOpenAI(
        base_url=ws_server.base_url, api_key=API_KEY, max_retries=0
    ) as http:
        answers = await asyncio.gather(*(http.chat.completions.create(**b) for b in bodies))
    assert over_ws == [a.choices[0].message.content for a in answers]
    assert all(over_ws)


async def test_completions_stream_with_usage_like_sse(ws_server, client):
    body = {"model": "tiny", "prompt": "one two", "max_tokens": 6, "temperature": 0}
    chunks = [c async for c in client.completions(**body, stream_options={"include_usage": True})]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    text = "".join(choice.text for c in chunks for choice in c.choices)
    sse = openai.OpenAI(base_url=ws_server.base_url, api_key=API_KEY, max_retries=0)
    assert text == sse.completions.create(**body).choices[0].text


async def test_msgpack_frames_carry_the_same_stream(ws_server, client):
    async with WebSocketClient(ws_url(ws_server), api_key=API_KEY, use_msgpack=True) as packed:
        assert await collect_chat(packed.chat(**chat_body(3))) == await collect_chat(
            client.chat(**chat_body(3))
        )


async def test_cancel_frees_blocks_while_the_others_go_on(ws_server):
    ws = await raw(ws_server)
    async with ws:
        await ws.send(
            json.dumps({"type": "chat.completions.create", "id": "long", "body": chat_body(0, 200)})
        )
        for i in range(3):
            body = chat_body(i + 1, 40)
            await ws.send(
                json.dumps({"type": "chat.completions.create", "id": f"o{i}", "body": body})
            )
        await until(ws, "chunk", "long")
        await ws.send(json.dumps({"type": "cancel", "id": "long"}))
        cancelled_at = time.monotonic()
        done: dict[str, str] = {}
        while len(done) < 4:
            message = await next_message(ws)
            assert message["type"] in ("chunk", "done"), message
            if message["type"] == "done":
                done[message["id"]] = message["status"]
                if message["id"] == "long":
                    freed = time.monotonic() - cancelled_at
        assert done == {"long": "cancelled", "o0": "finished", "o1": "finished", "o2": "finished"}
        assert freed < 1.0
    assert await wait_idle(ws_server, 2.0) < 1.0


@pytest.mark.parametrize(
    ("frame", "code", "param"),
    [
        ("{not json", "invalid_json", None),
        ("[1, 2]", "invalid_message", None),
        (json.dumps({"type": "embeddings.create", "id": "x"}), "invalid_message", "type"),
        (json.dumps({"type": "cancel", "id": "nobody"}), "unknown_request", "id"),
        (
            json.dumps({"type": "chat.completions.create", "id": 7, "body": {}}),
            "invalid_message",
            "id",
        ),
        (
            json.dumps({"type": "completions.create", "id": "b", "body": "text"}),
            "invalid_message",
            "body",
        ),
        (b"\x81\xa4type\xa6cancel", "invalid_frame", None),
    ],
)
async def test_a_bad_message_gets_an_error_and_the_connection_stays(ws_server, frame, code, param):
    async with await raw(ws_server) as ws:
        await ws.send(frame)
        error = await next_message(ws)
        assert error["type"] == "error" and error["id"] is None
        assert (error["error"]["code"], error["error"]["param"]) == (code, param)
        assert set(error["error"]) == {"message", "type", "param", "code"}
        await ws.send(
            json.dumps({"type": "chat.completions.create", "id": "ok", "body": chat_body(1, 3)})
        )
        assert (await until(ws, "done", "ok"))["status"] == "finished"


async def test_a_bad_body_fails_its_request_like_http(ws_server):
    async with await raw(ws_server) as ws:
        body = {**chat_body(1), "max_tokens": "many"}
        await ws.send(json.dumps({"type": "chat.completions.create", "id": "bad", "body": body}))
        error = await next_message(ws)
        assert (error["type"], error["id"], error["error"]["param"]) == (
            "error",
            "bad",
            "max_tokens",
        )
        assert await next_message(ws) == {"type": "done", "id": "bad", "status": "failed"}
        body = {**chat_body(1), "model": "gpt-nope"}
        await ws.send(json.dumps({"type": "chat.completions.create", "id": "bad", "body": body}))
        assert (await next_message(ws))["error"]["code"] == "model_not_found"
        await until(ws, "done", "bad")
        await ws.send(
            json.dumps({"type": "chat.completions.create", "id": "ok", "body": chat_body(1, 3)})
        )
        assert (await until(ws, "done", "ok"))["status"] == "finished"


async def test_a_duplicate_id_is_refused_and_the_first_request_goes_on(ws_server):
    async with await raw(ws_server) as ws:
        create = {"type": "chat.completions.create", "id": "a", "body": chat_body(1, 30)}
        await ws.send(json.dumps(create))
        await ws.send(json.dumps(create))
        statuses, errors = [], []
        while not statuses:
            message = await next_message(ws)
            if message["type"] == "error":
                errors.append(message)
            elif message["type"] == "done":
                statuses.append(message["status"])
        assert [e["error"]["code"] for e in errors] == ["duplicate_id"]
        assert errors[0]["id"] is None and statuses == ["finished"]


async def test_requests_over_the_connection_cap_get_an_error(ws_server):
    async with await raw(ws_server) as ws:
        for i in range(MAX_REQUESTS + 1):
            body = chat_body(i, 200)
            await ws.send(
                json.dumps({"type": "chat.completions.create", "id": f"r{i}", "body": body})
            )
        error = await until(ws, "error")
        assert (error["id"], error["error"]["code"]) == (f"r{MAX_REQUESTS}", "too_many_requests")
        assert await until(ws, "done", f"r{MAX_REQUESTS}") == {
            "type": "done",
            "id": f"r{MAX_REQUESTS}",
            "status": "failed",
        }
        for i in range(MAX_REQUESTS):
            await ws.send(json.dumps({"type": "cancel", "id": f"r{i}"}))
        ended = set()
        while len(ended) < MAX_REQUESTS:
            message = await until(ws, "done")
            ended.add(message["id"])
    await wait_idle(ws_server, 5.0)


async def test_a_dropped_connection_leaves_nothing_running(ws_server):
    ws = await raw(ws_server)
    for i in range(8):
        await ws.send(
            json.dumps(
                {"type": "chat.completions.create", "id": f"d{i}", "body": chat_body(i, 200)}
            )
        )
    await until(ws, "chunk")
    ws.transport.abort()  # no close frame: the TCP connection just goes
    assert await wait_idle(ws_server, 5.0) < 2.0


async def test_a_message_over_the_limit_closes_with_1009(ws_server):
    async with await raw(ws_server) as ws:
        await ws.send(json.dumps({"type": "cancel", "id": "x" * MAX_MESSAGE}))
        with pytest.raises(ConnectionClosed) as closed:
            await next_message(ws)
        assert closed.value.rcvd.code == 1009


async def test_a_connection_over_the_cap_is_closed_with_1013(ws_server):
    open_ones = [await raw(ws_server) for _ in range(MAX_CONNECTIONS)]
    try:
        extra = await raw(ws_server)
        with pytest.raises(ConnectionClosed) as closed:
            await next_message(extra)
        assert closed.value.rcvd.code == 1013
    finally:
        for ws in open_ones:
            await ws.close()


async def test_the_key_may_come_as_a_subprotocol_token_and_is_not_echoed(ws_server):
    ws = await raw(
        ws_server,
        additional_headers={},
        subprotocols=["llmkit.json", f"llmkit.bearer.{API_KEY}"],
        origin=ORIGIN,
    )
    async with ws:
        assert ws.subprotocol == "llmkit.json"
        await ws.send(
            json.dumps({"type": "chat.completions.create", "id": "k", "body": chat_body(2, 3)})
        )
        assert (await until(ws, "done", "k"))["status"] == "finished"


@pytest.mark.parametrize(
    ("headers", "subprotocols", "origin", "status"),
    [
        ({}, None, None, 401),
        ({"Authorization": "Bearer wrong"}, None, None, 401),
        ({}, ["llmkit.json", "llmkit.bearer.wrong"], ORIGIN, 401),
        (auth(), None, "http://evil.example", 403),
    ],
)
async def test_a_wrong_key_or_origin_is_refused_before_the_upgrade(
    ws_server, headers, subprotocols, origin, status
):
    with pytest.raises(InvalidStatus) as refused:
        await raw(ws_server, additional_headers=headers, subprotocols=subprotocols, origin=origin)
    response = refused.value.response
    assert response.status_code == status
    assert "error" in json.loads(response.body)
    assert API_KEY not in ws_server.log.read_text()


async def test_the_client_raises_the_servers_error(client):
    with pytest.raises(WebSocketError) as failed:
        await collect_chat(client.chat(**{**chat_body(1), "temperature": -3}))
    assert failed.value.param == "temperature"


async def test_leaving_the_clients_loop_cancels_the_request(ws_server, client):
    async for _chunk in client.chat(**chat_body(5, 200)):
        break
    assert await wait_idle(ws_server, 3.0) < 1.5


async def test_a_seed_the_engine_cannot_take_is_an_error_and_the_connection_serves_on(
    ws_server, client
):
    for seed in (2**64, -(2**63) - 1):
        with pytest.raises(WebSocketError) as failed:
            with anyio.fail_after(scaled(5)):
                await collect_chat(client.chat(**chat_body(0), seed=seed))
        assert failed.value.param == "seed"
        with anyio.fail_after(scaled(5)):
            assert await collect_chat(client.chat(**chat_body(1)))
    assert await gauge(ws_server, "llmkit:num_requests_waiting") >= 0


WS_HOSTILE = [
    None,
    True,
    -1,
    2**64,
    2**70,
    1e308,
    "1e999",
    "NaN",
    "",
    "\ud800",
    "yes",
    [],
    [None, 1],
    {},
    {"\ud800": 1},
    {"role": "user"},
]
CHAT_FIELDS = [
    "messages",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "n",
    "stop",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "response_format",
    "tools",
    "tool_choice",
    "stream_options",
    "priority",
    "chat_template_kwargs",
    "unknown",
]


async def test_any_value_in_any_field_is_answered_and_the_connection_serves_on(ws_server):
    """Random chat fields set to hostile values, 60 cases on one connection: each request
    ends (an error, or done) within 5 s, and a normal request after it completes."""
    rng = random.Random(34)
    async with await raw(ws_server) as ws:
        for case in range(60):
            body = chat_body(case, max_tokens=4)
            for name in rng.sample(CHAT_FIELDS, rng.randint(1, 3)):
                body[name] = rng.choice(WS_HOSTILE)
            message = {"type": "chat.completions.create", "id": f"h{case}", "body": body}
            await ws.send(json.dumps(message))
            while (answer := await next_message(ws, timeout=5))["type"] not in ("error", "done"):
                pass
            assert answer["id"] == f"h{case}", (body, answer)
            normal = {"type": "chat.completions.create", "id": f"n{case}", "body": chat_body(1)}
            await ws.send(json.dumps(normal))
            done = await until(ws, "done", f"n{case}")
            assert done["status"] == "finished", (body, done)
    assert await gauge(ws_server, "llmkit:num_requests_waiting") == 0


def create(rid: object, body: object, kind: str = "completions.create") -> dict:
    return {"type": kind, "id": rid, "body": body}


PROMPT_BODY = {"model": "tiny", "prompt": "Hello", "max_tokens": 3, "temperature": 0}
# A msgpack map {"model": <str8 holding the byte 0xff, which is not UTF-8>}.
INVALID_UTF8_MODEL = b"\x81\xa5model\xd9\x01\xff"


@pytest.mark.parametrize(
    ("message", "rid", "param"),
    [
        (create("s", {**PROMPT_BODY, "model": "\ud800"}), "s", "model"),
        (create("s", {**PROMPT_BODY, "stop": ["ok", "\udfff"]}), "s", "stop[1]"),
        (create("s", {**PROMPT_BODY, "logit_bias": {"\ud83d": 1}}), "s", "logit_bias"),
        (create("\ud800", PROMPT_BODY), None, "id"),
        ({"type": "cancel", "id": "\ud800"}, None, "id"),
    ],
)
async def test_a_lone_surrogate_fails_its_request_unquoted_and_the_connection_stays(
    ws_server, message, rid, param
):
    """The issue's case (a fuzz closed the whole connection): JSON's ``\\ud800`` escape
    decodes to a string no encoder can write back; it must not be echoed."""
    async with await raw(ws_server) as ws:
        await ws.send(json.dumps(message))  # ensure_ascii: the surrogate travels as an escape
        error = await next_message(ws)
        assert (error["type"], error["id"], error["error"]["param"]) == ("error", rid, param)
        assert error["error"]["code"] == "invalid_text"
        if rid is not None:
            assert await next_message(ws) == {"type": "done", "id": rid, "status": "failed"}
        await ws.send(json.dumps(create("ok", PROMPT_BODY)))
        assert (await until(ws, "done", "ok"))["status"] == "finished"


async def test_invalid_utf8_in_a_msgpack_frame_fails_only_its_request(ws_server):
    async with await raw(ws_server, subprotocols=["llmkit.msgpack"]) as ws:
        header = msgpack.packb({"type": "completions.create", "id": "u"})[1:]
        await ws.send(b"\x83" + header + msgpack.packb("body") + INVALID_UTF8_MODEL)
        error = msgpack.unpackb(await asyncio.wait_for(ws.recv(), 30))
        assert (error["id"], error["error"]["param"]) == ("u", "model")
        assert msgpack.unpackb(await asyncio.wait_for(ws.recv(), 30))["type"] == "done"
        await ws.send(msgpack.packb(create("ok", PROMPT_BODY)))
        while (answer := msgpack.unpackb(await asyncio.wait_for(ws.recv(), 30)))["type"] != "done":
            pass
        assert answer == {"type": "done", "id": "ok", "status": "finished"}


def test_hostile_values_in_any_field_fail_that_request_and_the_connection_serves_on(ws_server):
    """Property (hypothesis): any value in any body field, NaN and lone surrogates
    included (as JSON's NaN literal and \\ud800 escapes), ends its request (an error and
    done, or done) on the same connection, and a normal request after it completes."""
    with connect_sync(ws_url(ws_server), additional_headers=auth()) as ws:

        def ending(rid: str) -> list[dict]:
            """The request's messages other than chunks, up to its done."""
            ends = []
            while True:
                message = json.loads(ws.recv(timeout=10))
                if message.get("id") == rid and message["type"] != "chunk":
                    ends.append(message)
                    if message["type"] == "done":
                        return ends

        @HOSTILE_SETTINGS
        @given(
            fields=st.dictionaries(
                st.sampled_from([*CHAT_FIELDS, "model"]), values(), min_size=1, max_size=3
            ),
            chat=st.booleans(),
        )
        @example(fields={"model": "\ud800"}, chat=False)  # the issue's: it closed the socket
        @example(fields={"temperature": math.nan, "\udc80": 1}, chat=True)
        def case(fields: dict, chat: bool) -> None:
            body = {**(chat_body(0, max_tokens=3) if chat else PROMPT_BODY), **fields}
            kind = "chat.completions.create" if chat else "completions.create"
            ws.send(json.dumps(create("h", body, kind)))
            ends = ending("h")
            assert [m["type"] for m in ends] in (["done"], ["error", "done"]), ends
            ws.send(json.dumps(create("n", PROMPT_BODY)))
            assert ending("n") == [{"type": "done", "id": "n", "status": "finished"}]

        case()
