"""Each 2026 family's chat template renders a tools conversation, and its parsers read back
what the template wrote for the assistant's turn, whole and streamed one character at a
time, through the server's extraction (reasoning first, then calls)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from transformers.utils.chat_template_utils import _compile_jinja_template

from llmkit.plugins import CHAT_TEMPLATES, REASONING_PARSERS, TOOL_PARSERS, load
from llmkit.serving.extraction import Extractor
from llmkit.tools import ToolCallStream

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city."},
                    "days": {"type": "integer"},
                    "detailed": {"type": "boolean"},
                    "where": {"type": "object"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The time in a zone.",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    },
]
WEATHER = {"city": "Paris 12", "days": 3, "detailed": True, "where": {"lat": 48.8, "tags": ["a"]}}
TIME = {"tz": "CET"}

# family: (template, tool parser, reasoning parser, what ends the assistant's turn,
# the assistant message's extra fields, how many calls one turn holds)
FAMILIES: dict[str, tuple[str, str, str | None, str, dict[str, Any], int]] = {
    "qwen3_coder": (
        "qwen3_coder",
        "qwen3_coder",
        None,
        "<|im_end|>\n",
        {"content": "Checking."},
        2,
    ),
    "gpt_oss": ("gpt_oss", "openai", "openai", "", {"reasoning_content": "Look it up."}, 1),
    "deepseek_v31": ("deepseek_v31", "deepseek_v31", None, "<｜end▁of▁sentence｜>", {}, 2),
    "glm45": ("glm45", "glm45", "qwen3", "", {"reasoning_content": "Two calls."}, 2),
    "kimi_k2": ("kimi_k2", "kimi_k2", None, "<|im_end|>", {"content": "Checking."}, 2),
}


def render(template: str, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
    return _compile_jinja_template(template).render(
        messages=messages, tools=TOOLS, add_generation_prompt=generation_prompt, bos_token=""
    )


def conversation(family: str) -> list[dict[str, Any]]:
    extra, count = FAMILIES[family][4], FAMILIES[family][5]
    calls = [("get_weather", WEATHER), ("get_time", TIME)][:count]
    tool_calls = [
        {
            "id": f"functions.{name}:{i}",
            "type": "function",
            "function": {"name": name, "arguments": args},
        }
        for i, (name, args) in enumerate(calls)
    ]
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris, and the time?"},
        {"role": "assistant", **extra, "tool_calls": tool_calls},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": '{"c": 18}'},
    ]


def extractor(family: str) -> Extractor:
    _, tool_name, reasoning_name, *_ = FAMILIES[family]
    parser = load(TOOL_PARSERS, tool_name)()
    parser.use_tools(TOOLS)
    reasoning = load(REASONING_PARSERS, reasoning_name)() if reasoning_name else None
    return Extractor(reasoning, parser)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_parser_reads_back_what_the_template_wrote(family):
    template = load(CHAT_TEMPLATES, FAMILIES[family][0])
    messages = conversation(family)
    prompt = render(template, messages[:2], True)
    turn = render(template, messages[:3], False)
    assert turn.startswith(prompt), "the template renders the prompt before the turn differently"
    output = turn[len(prompt) :]
    end = FAMILIES[family][3]
    assert output.endswith(end)
    output = output[: len(output) - len(end)] if end else output
    sent = messages[2]
    expected = [(c["function"]["name"], c["function"]["arguments"]) for c in sent["tool_calls"]]

    whole = extractor(family).whole(output)
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in whole.tool_calls or []]
    assert calls == expected, output
    assert (whole.content or "") == sent.get("content", "")
    assert (whole.reasoning or "") == sent.get("reasoning_content", "")
    if family == "kimi_k2":  # Kimi's ids are the model's own, written back by the template
        assert [c.id for c in whole.tool_calls or []] == [c["id"] for c in sent["tool_calls"]]

    stream = extractor(family)
    content, reasoning, args, names = "", "", {}, {}
    for k, piece in enumerate([*output, ""]):
        delta = stream.feed(piece, final=k == len(output))
        if delta is None:
            continue
        content += delta.content or ""
        reasoning += delta.reasoning_content or ""
        for call in delta.tool_calls or []:
            if call.id:
                names[call.index] = call.function.name
            args[call.index] = args.get(call.index, "") + call.function.arguments
    streamed = [(names[i], json.loads(args[i])) for i in sorted(names)]
    assert streamed == expected
    assert (content, reasoning) == (whole.content or "", whole.reasoning or "")
    assert render(template, messages, True)  # the tool result renders too


def test_a_string_parameter_streams_before_its_close_tag():
    """Qwen3-Coder's file contents reach the client as the model writes them."""
    parser = load(TOOL_PARSERS, "qwen3_coder")()
    parser.use_tools(
        [
            {
                "function": {
                    "name": "write",
                    "parameters": {"properties": {"text": {"type": "string"}}},
                }
            }
        ]
    )
    stream = ToolCallStream(parser)
    _, deltas = stream.feed("<tool_call>\n<function=write>\n<parameter=text>\nline one\nline tw")
    assert "".join(d.arguments for d in deltas) == '{"text": "line one\\nline tw'
    _, deltas = stream.feed("o\n</param")
    assert "".join(d.arguments for d in deltas) == "o"
    stream.feed("eter>\n</function>\n</tool_call>", final=True)
    assert json.loads(stream.calls[0].arguments) == {"text": "line one\nline two"}
