"""/v1/messages and /v1/messages/count_tokens through a real `llmkit serve`, driven by the
official `anthropic` client (which sends its key as x-api-key)."""

from __future__ import annotations

import json

import pytest

anthropic = pytest.importorskip("anthropic")

MODEL = "tiny"
API_KEY = "test-key"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    # Bounded, so that a random model constrained to it finishes well within max_tokens.
    "input_schema": {
        "type": "object",
        "properties": {"city": {"enum": ["Paris", "Oslo"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
FORCED = {"type": "tool", "name": "get_weather"}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def claude(server):
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0)


def test_create_and_stream_tell_the_same_greedy_answer(claude):
    # (This client leaves sampling fields to extra_body.)
    kwargs = dict(
        model=MODEL,
        max_tokens=12,
        system="Be terse.",
        messages=ASK,
        extra_body={"temperature": 0.0, "top_k": 1},
    )
    message = claude.messages.create(**kwargs)
    assert message.type == "message" and message.role == "assistant" and message.model == MODEL
    assert message.id.startswith("msg_") and message.content[0].type == "text"
    assert message.stop_reason in ("end_turn", "max_tokens")
    with claude.messages.stream(**kwargs) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == message.content[0].text == final.content[0].text
    assert final.stop_reason == message.stop_reason and final.usage == message.usage
    counted = claude.messages.count_tokens(model=MODEL, system="Be terse.", messages=ASK)
    assert counted.input_tokens == message.usage.input_tokens > 0
    with_tools = claude.messages.count_tokens(model=MODEL, messages=ASK, tools=[WEATHER])
    assert (
        with_tools.input_tokens
        > claude.messages.count_tokens(model=MODEL, messages=ASK).input_tokens
    )


def test_a_forced_tool_use_streamed_and_answered(claude):
    with claude.messages.stream(
        model=MODEL, max_tokens=36, messages=ASK, tools=[WEATHER], tool_choice=FORCED
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    call = final.content[-1]
    assert call.type == "tool_use" and call.name == "get_weather"
    assert call.input["city"] in ("Paris", "Oslo") and final.stop_reason == "tool_use"
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "input_json" in events and "content_block_stop" in events
    created = claude.messages.create(
        model=MODEL, max_tokens=36, messages=ASK, tools=[WEATHER], tool_choice=FORCED
    )
    assert created.content[-1].type == "tool_use" and created.stop_reason == "tool_use"
    # The call and its result go back; the model answers on.
    answer = claude.messages.create(
        model=MODEL,
        max_tokens=4,
        messages=[
            *ASK,
            {"role": "assistant", "content": [call.model_dump()]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny"}],
            },
        ],
    )
    assert answer.content[0].type == "text" and answer.usage.output_tokens > 0


def test_the_raw_stream_is_named_events_without_done(server):
    body = {"model": MODEL, "max_tokens": 3, "messages": ASK, "stream": True}
    with server.http() as http:
        text = http.post("/v1/messages", json=body).text
    names = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert "[DONE]" not in text
    delta = json.loads(text.split("event: message_delta\ndata: ")[1].split("\n")[0])
    assert delta["usage"]["output_tokens"] == 3 and delta["delta"]["stop_reason"] == "max_tokens"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": MODEL, "messages": ASK}, "max_tokens"),
        ({"model": MODEL, "max_tokens": 5, "messages": []}, "messages"),
        (
            {"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "messages.0.content",
        ),
        ({"max_tokens": 5, "messages": ASK, "stop_sequences": [""]}, "stop_sequences"),
        ({"max_tokens": 5, "messages": ASK, "tool_choice": FORCED}, "tool_choice"),
        ({"max_tokens": 999999, "messages": ASK}, "maximum context length"),
    ],
)
def test_bad_input_is_anthropics_400_naming_the_field(server, body, field):
    with server.http(api_key=None) as http:
        response = http.post("/v1/messages", json=body, headers={"x-api-key": API_KEY})
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert field in error["error"]["message"]


def test_the_client_raises_its_own_errors(claude, server):
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=MODEL, max_tokens=5, messages=[])
    assert "messages" in caught.value.body["error"]["message"]
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="claude-sonnet-4", max_tokens=5, messages=ASK)
    wrong = anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as refused:
        wrong.messages.create(model=MODEL, max_tokens=5, messages=ASK)
    assert refused.value.body["error"]["type"] == "authentication_error"  # Anthropic's shape
