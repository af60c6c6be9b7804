"""Each 2026 family's parsers and template behind a real `llmkit serve`, read by the
official clients: the output is forced (a regex) to hold reasoning and a call in the
family's markup; the openai client's streamed calls, assembled by its own helpers, equal
the whole answer's; answers and deltas carry the reasoning as both `reasoning` and
`reasoning_content`; the anthropic client sees it as a `thinking` block."""

from __future__ import annotations

import json

import openai
import pytest

from tool_helpers import TOOLS

anthropic = pytest.importorskip("anthropic")

API_KEY = "test-key"
USER = [{"role": "user", "content": "What is the time in Paris?"}]
THINK = r"<think>[a-z]{1,8}</think>"
TZ = r'\{"tz": "(CET|UTC)"\}'
# tool parser: its reasoning parser, and the output the regex forces
FAMILIES = {
    "qwen3_coder": (
        "qwen3",
        THINK + r"<tool_call>\n<function=get_weather>\n<parameter=city>\n(Paris|Oslo)\n"
        r"</parameter>\n<parameter=days>\n[1-7]\n</parameter>\n</function>\n</tool_call>",
    ),
    "openai": (
        "openai",
        r"<\|channel\|>analysis<\|message\|>[a-z]{1,8}<\|end\|><\|start\|>assistant"
        r"<\|channel\|>commentary to=functions\.get_time <\|constrain\|>json<\|message\|>"
        + TZ
        + r"<\|call\|>",
    ),
    "deepseek_v31": (
        "qwen3",
        THINK + "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>" + TZ
        + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ),
    "glm45": (
        "qwen3",
        THINK + r"<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>(CET|UTC)</arg_value>"
        r"\n</tool_call>",
    ),
    "kimi_k2": (
        "qwen3",
        THINK + r"<\|tool_calls_section_begin\|><\|tool_call_begin\|>functions\.get_time:0"
        r"<\|tool_call_argument_begin\|>" + TZ + r"<\|tool_call_end\|><\|tool_calls_section_end\|>",
    ),
}  # fmt: skip
TEMPLATES = {"openai": "gpt_oss"}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, module_server, tiny_model):
    name = request.param
    reasoning, regex = FAMILIES[name]
    server = module_server(
        tiny_model, "--enable-auto-tool-choice", "--tool-call-parser", name,
        "--reasoning-parser", reasoning,
        "--chat-template", TEMPLATES.get(name, name),
        "--served-model-name", "tiny", "--api-key", API_KEY, "--max-model-len", "2048",
        "--log-level", "warning",
    )  # fmt: skip
    return name, server, regex


def test_streamed_calls_and_reasoning_equal_the_whole_answer(family):
    name, server, regex = family
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
    kwargs = dict(
        model="tiny", messages=USER, tools=TOOLS, temperature=1.0, seed=0, max_tokens=300,
        extra_body={"structured_outputs": {"regex": regex}},
    )  # fmt: skip
    whole = client.chat.completions.create(**kwargs).choices[0]
    assert whole.finish_reason == "tool_calls", whole
    message = whole.message
    calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]
    assert len(calls) == 1 and not message.content
    if name == "kimi_k2":
        assert calls[0][0] == "functions.get_time:0"
    thought = message.model_extra["reasoning"]
    assert thought.isalpha() and message.model_extra["reasoning_content"] == thought

    with client.chat.completions.stream(**kwargs) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == "tool_calls"
    streamed = [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in final.message.tool_calls
    ]
    assert [c[1:] for c in streamed] == [c[1:] for c in calls]
    chunks = [c for c in client.chat.completions.create(stream=True, **kwargs) if c.choices]
    for field in ("reasoning", "reasoning_content"):
        text = "".join((c.choices[0].delta.model_extra or {}).get(field) or "" for c in chunks)
        assert text == thought, field


def test_the_anthropic_client_sees_thinking(family):
    name, server, regex = family
    if name != "openai":
        pytest.skip("one family's server is enough for the Messages API")
    claude = anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0)
    kwargs = dict(
        model="tiny", max_tokens=300, messages=USER,
        tools=[{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
               for t in TOOLS],
        extra_body={"temperature": 1.0, "structured_outputs": {"regex": regex}},
    )  # fmt: skip
    message = claude.messages.create(**kwargs)
    kinds = [block.type for block in message.content]
    assert kinds == ["thinking", "tool_use"] and message.stop_reason == "tool_use"
    assert message.content[0].thinking.isalpha()
    with claude.messages.stream(**kwargs) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert "thinking" in events  # the SDK's event for each thinking_delta
    assert [block.type for block in final.content] == kinds
    # The thinking goes back with the call (interleaved reasoning) and renders.
    followup = [
        *USER,
        {"role": "assistant", "content": final.content},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": final.content[1].id, "content": "noon"},
        ]},
    ]  # fmt: skip
    again = claude.messages.create(model="tiny", max_tokens=4, messages=followup)
    assert again.stop_reason in ("end_turn", "max_tokens")
