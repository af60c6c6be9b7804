"""/v1/responses through a real `llmkit serve`, driven by the official openai client:
create, stream, function tools round-tripped through previous_response_id, parse."""

from __future__ import annotations

from typing import Literal

import openai
import pytest
from pydantic import BaseModel

MODEL = "tiny"
GREEDY = dict(temperature=0.0, max_output_tokens=8)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    # Bounded, so that a random model constrained to it finishes well within the limit.
    "parameters": {
        "type": "object",
        "properties": {"city": {"enum": ["Paris", "Oslo"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


class Answer(BaseModel):
    city: Literal["Paris", "Oslo"]


def test_create_stream_retrieve_delete(client):
    made = client.responses.create(model=MODEL, input="Hello", instructions="Be terse.", **GREEDY)
    assert made.id.startswith("resp_") and made.object == "response" and made.model == MODEL
    assert made.status in ("completed", "incomplete") and made.output[0].type == "message"
    assert made.usage.output_tokens > 0 and made.instructions == "Be terse."
    with client.responses.stream(
        model=MODEL, input="Hello", instructions="Be terse.", **GREEDY
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == made.output_text
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds and "response.output_item.done" in kinds
    assert kinds[-1] == "response.completed" and final.status == made.status
    assert client.responses.retrieve(made.id).output_text == made.output_text
    client.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)


def test_a_function_call_and_its_output_through_previous_response_id(client):
    called = client.responses.create(
        model=MODEL,
        input="Weather in Paris?",
        tools=[WEATHER],
        tool_choice="required",
        max_output_tokens=40,
    )
    call = called.output[-1]
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.arguments.startswith("{") and call.call_id
    answered = client.responses.create(
        model=MODEL,
        previous_response_id=called.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}],
        max_output_tokens=4,
    )
    assert answered.previous_response_id == called.id
    assert answered.output[0].type == "message"
    # The question and the call came from the stored history, into the prompt.
    asked = client.responses.create(model=MODEL, input="Weather in Paris?", max_output_tokens=1)
    assert answered.usage.input_tokens > asked.usage.input_tokens + 5
    with client.responses.stream(
        model=MODEL,
        input="Weather in Oslo?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=40,
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output[-1].type == "function_call"
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds


def test_parse_a_json_schema_text_format(client):
    parsed = client.responses.parse(
        model=MODEL, input="Pick a city.", text_format=Answer, max_output_tokens=40
    )
    assert isinstance(parsed.output_parsed, Answer)


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"input": "hi", "previous_response_id": "resp_nope"}, 404, "previous_response_id"),
        ({"input": [{"type": "image_generation_call"}]}, 400, "input"),
        ({"instructions": "hi"}, 400, "input"),
        ({"input": "hi", "max_output_tokens": 0}, 400, "max_output_tokens"),
        ({"input": "hi", "max_output_tokens": 9999}, 400, "input"),
        (
            {"input": "hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "x"}},
            400,
            "tool_choice",
        ),
    ],
)
def test_bad_input_names_the_field(server, body, status, field):
    with server.http() as http:
        response = http.post("/v1/responses", json=body)
        missing = http.get("/v1/responses/resp_nope")
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == field, response.text
    assert missing.status_code == 404


def test_a_prompt_over_the_context_says_so_naming_input(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="hi", max_output_tokens=255)
    assert caught.value.body["param"] == "input"
    assert caught.value.body["message"].startswith("This model's maximum context length is 256")
