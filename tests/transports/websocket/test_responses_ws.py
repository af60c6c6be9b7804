"""responses.create over the WebSocket endpoint: the Responses API's stream events as
chunks, then done; a bad body is an error naming the field."""

from __future__ import annotations

import json

import pytest
from websockets.asyncio.client import connect

pytestmark = pytest.mark.anyio


async def _messages(server, body: dict) -> list[dict]:
    url = server.url.replace("http://", "ws://") + "/v1/ws"
    async with connect(url, additional_headers={"Authorization": "Bearer test-key"}) as ws:
        await ws.send(json.dumps({"type": "responses.create", "id": "r1", "body": body}))
        got = []
        while not got or got[-1]["type"] != "done":
            got.append(json.loads(await ws.recv()))
    return got


async def test_responses_create_streams_its_events(server):
    got = await _messages(server, {"model": "tiny", "input": "Hello", "max_output_tokens": 4})
    events = [m["data"] for m in got if m["type"] == "chunk"]
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == events[-1]["response"]["output"][0]["content"][0]["text"]
    assert got[-1]["status"] == "finished"


async def test_a_bad_body_is_an_error_naming_the_field(server):
    got = await _messages(server, {"model": "tiny", "input": "hi", "max_output_tokens": 0})
    error = next(m for m in got if m["type"] == "error")
    assert error["error"]["param"] == "max_output_tokens"
