"""/v1/responses with a reasoning parser and a tool-call parser: the answer's reasoning,
text and call as output items, streamed and not, the same."""

from __future__ import annotations

import openai
import pytest

from tool_helpers import SCHEMAS

TOOLS = [{"type": "function", "name": name, "parameters": s} for name, s in SCHEMAS.items()]
# The random model is forced to write reasoning, text and a call for the parsers.
HERMES_OUTPUT = (
    r'<think>[a-z]{1,8}</think>Sure\.<tool_call>\{"name": "get_time", "arguments": '
    r'\{"tz": "(CET|UTC)"\}\}</tool_call>'
)


@pytest.fixture(scope="module")
def hermes(module_server, tiny_model):
    server = module_server(
        tiny_model,
        *("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),
        *("--reasoning-parser", "qwen3", "--max-model-len", "1024", "--log-level", "warning"),
    )
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)


def test_reasoning_text_and_a_call_as_output_items(hermes):
    kwargs = dict(
        model=hermes.models.list().data[0].id,
        input="What time is it in Paris?",
        tools=TOOLS,
        temperature=1.0,
        max_output_tokens=80,
        extra_body={"seed": 0, "structured_outputs": {"regex": HERMES_OUTPUT}},
    )
    made = hermes.responses.create(**kwargs)
    assert [item.type for item in made.output] == ["reasoning", "message", "function_call"]
    assert made.output[0].content[0].text.isalpha() and made.output_text == "Sure."
    assert made.output[2].name == "get_time"
    with hermes.responses.stream(**kwargs) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.reasoning_text.delta" in kinds
    assert _said(final) == _said(made)


def _said(response) -> list[tuple]:
    """Each output item's kind and what it says."""
    reasoning, message, call = response.output
    return [
        ("reasoning", reasoning.content[0].text),
        ("message", message.content[0].text),
        ("function_call", call.name, call.arguments, call.call_id.startswith("call_")),
    ]
