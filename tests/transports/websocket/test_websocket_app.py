"""/v1/ws in an app mounted inside another, where the app itself enforces every limit."""

from __future__ import annotations

import json

import anyio
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from llmkit import RequestOutputKind, SamplingParams
from llmkit.config import EngineConfig
from llmkit.engine.async_engine import AsyncEngine
from llmkit.http import AppOptions, WebSocketOptions, create_app
from llmkit.transports.http.middleware import ServerLoad
from llmkit.transports.websocket.connection import Codec, Connection

OPTIONS = WebSocketOptions(max_message_bytes=1000, idle_timeout_s=0.3)


@pytest.fixture(scope="module")
def engine(tiny_model):
    engine = AsyncEngine(EngineConfig(model=tiny_model, max_model_len=128))
    engine.start()
    yield engine
    anyio.run(engine.shutdown)


@pytest.fixture
def client(engine):
    outer = Starlette(routes=[Mount("/llm", create_app(engine, AppOptions(websocket=OPTIONS)))])
    with TestClient(outer) as client:
        yield client


def create(rid: str, max_tokens: int = 4) -> str:
    body = {"prompt": "hello", "max_tokens": max_tokens}
    return json.dumps({"type": "completions.create", "id": rid, "body": body})


def test_the_mounted_endpoint_streams_and_reports_an_engine_failure(client, engine, fail_next_step):
    with client.websocket_connect("/llm/v1/ws") as ws:
        ws.send_text(create("a"))
        messages = []
        while not messages or messages[-1]["type"] != "done":
            messages.append(ws.receive_json())
        assert messages[-1] == {"type": "done", "id": "a", "status": "finished"}
        assert {m["data"]["object"] for m in messages[:-1]} == {"text_completion"}

        fail_next_step(engine, RuntimeError("injected failure"))
        ws.send_text(create("b"))
        error = ws.receive_json()
        while error["type"] == "chunk":
            error = ws.receive_json()
        assert error["type"] == "error" and "injected failure" in error["error"]["message"]
        assert error["error"]["type"] == "server_error"
        assert ws.receive_json() == {"type": "done", "id": "b", "status": "failed"}


def test_a_message_over_the_limit_closes_with_1009(client):
    with client.websocket_connect("/llm/v1/ws") as ws:
        ws.send_text(json.dumps({"type": "cancel", "id": "x" * 1000}))
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 1009


def test_an_idle_connection_is_closed(client):
    with client.websocket_connect("/llm/v1/ws") as ws:
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert (closed.value.code, closed.value.reason) == (1000, "idle timeout")


def test_with_no_origins_listed_only_the_pages_own_origin_may_connect(client):
    with client.websocket_connect("/llm/v1/ws", headers={"origin": "http://testserver"}) as ws:
        ws.send_text(create("own"))
        assert ws.receive_json()["type"] in ("chunk", "done")
    with (
        pytest.raises(WebSocketDenialResponse) as refused,
        client.websocket_connect("/llm/v1/ws", headers={"origin": "http://elsewhere.example"}),
    ):
        pass
    assert refused.value.status_code == 403
    assert "--allowed-origins" in refused.value.json()["error"]["message"]


def test_an_overloaded_engine_refuses_over_the_websocket_with_code_overloaded(tiny_model):
    engine = AsyncEngine(
        EngineConfig(model=tiny_model, max_model_len=128, max_num_seqs=1, max_queued_requests=1)
    )
    with TestClient(create_app(engine, owns_engine=True)) as client:
        with client.websocket_connect("/v1/ws") as ws:
            for i in range(4):
                ws.send_text(create(f"r{i}", max_tokens=100))
            errors, done = [], {}
            while len(done) < 4:
                message = ws.receive_json()
                if message["type"] == "error":
                    errors.append(message)
                elif message["type"] == "done":
                    done[message["id"]] = message["status"]
        # One runs and one waits; the others are refused before they are tokenized.
        assert sorted(done.values()).count("failed") >= 2
        assert {e["error"]["code"] for e in errors} == {"overloaded"}
        assert all(e["error"]["type"] == "service_unavailable" for e in errors)
        assert all(e["error"]["retry_after_ms"] > 0 for e in errors)
        assert [s for s in done.values() if s != "failed"] == ["finished"] * (4 - len(errors))


class SlowSocket:
    """A client that takes 50 ms to read each message, then leaves once its request is done."""

    def __init__(self, frame: str):
        self.incoming = [frame]
        self.sent: list[dict] = []
        self.done = anyio.Event()

    async def receive(self) -> dict:
        if self.incoming:
            return {"type": "websocket.receive", "text": self.incoming.pop()}
        await self.done.wait()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send_text(self, text: str) -> None:
        await anyio.sleep(0.05)
        self.sent.append(json.loads(text))
        if self.sent[-1]["type"] == "done":
            self.done.set()


@pytest.mark.anyio
async def test_a_slow_clients_deltas_coalesce_into_fewer_messages(engine):
    ctx = create_app(engine).state.serving
    body = {"prompt": "hello", "max_tokens": 60, "ignore_eos": True, "temperature": 0}
    frame = json.dumps({"type": "completions.create", "id": "s", "body": body})
    slow = SlowSocket(frame)
    connection = Connection(ctx, slow, Codec(None), WebSocketOptions(), ServerLoad())  # type: ignore[arg-type]
    await connection.serve()
    chunks = [m["data"] for m in slow.sent if m["type"] == "chunk"]
    assert slow.sent[-1] == {"type": "done", "id": "s", "status": "finished"}
    # 60 tokens came in far fewer messages, each holding what arrived while the last was sent.
    assert len(chunks) < 30
    text = "".join(c["choices"][0]["text"] for c in chunks)
    quick = await collect_text(engine, body)
    assert text == quick


async def collect_text(engine, body: dict) -> str:
    params = SamplingParams(
        max_tokens=body["max_tokens"],
        temperature=0,
        ignore_eos=True,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )
    text = ""
    async for out in engine.generate(body["prompt"], params):
        text = out.outputs[0].text
    return text
