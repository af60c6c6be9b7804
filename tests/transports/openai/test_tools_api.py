"""Tool calling, reasoning and chat templates through real `llmkit serve` processes and the
official openai client; plugins found through their entry points, a broken one included."""

from __future__ import annotations

import json
import subprocess

import httpx
import jsonschema
import openai
import pytest

from serve_helpers import rendered
from tool_helpers import TOOLS, broken_plugin_env, schema_of, without_template

API_KEY = "test-key"
FLAGS = (
    "--served-model-name", "tiny", "--api-key", API_KEY, "--max-model-len", "1024",
    "--log-level", "warning",
)  # fmt: skip
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def connect(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)


@pytest.fixture(scope="module")
def hermes(module_server, tiny_model):
    flags = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    return connect(module_server(tiny_model, *flags, "--reasoning-parser", "qwen3", *FLAGS))


@pytest.fixture(scope="module")
def broken_env(tmp_path_factory) -> dict[str, str]:
    return broken_plugin_env(tmp_path_factory.mktemp("broken-plugin"))


@pytest.fixture(scope="module")
def example(module_server, tiny_model, broken_env):
    """Every plugin of the example distribution, while a broken plugin is installed too."""
    return module_server(
        tiny_model,
        "--enable-auto-tool-choice",
        "--tool-call-parser", "example_functions",
        "--chat-template", "example_functions",
        "--reasoning-parser", "example_think",
        *FLAGS,
        env=broken_env,
    )  # fmt: skip


def check_calls(calls, names=None) -> None:
    assert calls
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert names is None or call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), schema_of(call.function.name))


def stream_calls(chunks) -> tuple[list[tuple[str, str]], str | None, str]:
    """(name, arguments) per call from the deltas, checking their shape; finish; content."""
    calls: list[list[str]] = []
    finish, content = None, ""
    for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                if delta.index == len(calls):
                    assert delta.id and delta.type == "function" and delta.function.name
                    calls.append([delta.function.name, delta.function.arguments or ""])
                else:
                    assert delta.id is None and delta.function.name is None
                    calls[delta.index][1] += delta.function.arguments
    return [(n, a) for n, a in calls], finish, content


@pytest.mark.parametrize(
    "choice",
    ["required", {"type": "function", "function": {"name": "get_time"}}],
    ids=["required", "named"],
)
def test_forced_calls_are_valid_streamed_or_not(hermes, choice):
    names = ["get_time"] if isinstance(choice, dict) else ["get_weather", "get_time"]
    for seed in range(3):
        kwargs = dict(
            model="tiny", messages=USER, tools=TOOLS, tool_choice=choice, temperature=1.0,
            seed=seed, max_tokens=400,
        )  # fmt: skip
        out = hermes.chat.completions.create(**kwargs).choices[0]
        assert out.finish_reason == "tool_calls"
        check_calls(out.message.tool_calls, names)
        whole = [(c.function.name, c.function.arguments) for c in out.message.tool_calls]
        calls, finish, _ = stream_calls(hermes.chat.completions.create(stream=True, **kwargs))
        assert calls == whole and finish == "tool_calls"


@pytest.mark.parametrize(
    ("choice", "cut"),
    [("required", 3), ({"type": "function", "function": {"name": "get_time"}}, 1)],
    ids=["required", "named"],
)
def test_a_forced_call_cut_by_max_tokens_keeps_its_arguments_as_written(hermes, choice, cut):
    """As OpenAI: the arguments so far, unclosed, and finish_reason "length"."""
    kwargs = dict(
        model="tiny", messages=USER, tools=TOOLS, tool_choice=choice, temperature=0,
        parallel_tool_calls=False,
    )  # fmt: skip
    full = hermes.chat.completions.create(max_tokens=400, **kwargs)
    whole = full.choices[0].message.tool_calls[0].function.arguments
    max_tokens = full.usage.completion_tokens - cut  # ends inside the arguments' object
    out = hermes.chat.completions.create(max_tokens=max_tokens, **kwargs).choices[0]
    assert out.finish_reason == "length"
    [call] = out.message.tool_calls
    arguments = call.function.arguments
    assert whole.startswith(arguments) and len(arguments) < len(whole), (arguments, whole)
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)
    chunks = hermes.chat.completions.create(max_tokens=max_tokens, stream=True, **kwargs)
    assert stream_calls(chunks)[:2] == ([(call.function.name, arguments)], "length")


def test_no_parallel_calls_gives_one(hermes):
    out = hermes.chat.completions.create(
        model="tiny", messages=USER, tools=TOOLS, tool_choice="required", temperature=1.0,
        seed=1, max_tokens=400, parallel_tool_calls=False,
    )  # fmt: skip
    assert len(out.choices[0].message.tool_calls) == 1


def test_tool_choice_none_answers_text(hermes):
    out = hermes.chat.completions.create(
        model="tiny", messages=USER, tools=TOOLS, tool_choice="none", max_tokens=8
    ).choices[0]
    assert out.message.tool_calls is None and out.message.content
    assert out.finish_reason == "length"


HERMES_OUTPUT = (
    r'<think>[a-z]{1,8}</think>Sure\.<tool_call>\{"name": "get_time", "arguments": '
    r'\{"tz": "(CET|UTC)"\}\}</tool_call>'
)


def test_auto_reads_calls_and_reasoning(hermes):
    """The output is forced to hold reasoning, text and a call; the parsers take it apart."""
    kwargs = dict(
        model="tiny", messages=USER, tools=TOOLS, temperature=1.0, seed=0, max_tokens=80,
        extra_body={"structured_outputs": {"regex": HERMES_OUTPUT}},
    )  # fmt: skip
    out = hermes.chat.completions.create(**kwargs).choices[0]
    assert out.finish_reason == "tool_calls"
    assert out.message.content == "Sure."
    assert out.message.reasoning_content.isalpha()
    check_calls(out.message.tool_calls, ["get_time"])
    chunks = list(hermes.chat.completions.create(stream=True, **kwargs))
    calls, finish, content = stream_calls(chunks)
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert calls == [(c.function.name, c.function.arguments) for c in out.message.tool_calls]
    assert (finish, content, reasoning) == ("tool_calls", "Sure.", out.message.reasoning_content)


def test_history_with_tool_results_renders_and_runs(hermes):
    call = {
        "id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'},
    }  # fmt: skip
    messages = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ]
    out = hermes.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, tool_choice="none", max_tokens=5
    )
    assert out.choices[0].message.content
    server_url = str(hermes.base_url).removesuffix("/v1/")
    with httpx.Client(base_url=server_url, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        prompt = rendered(http, messages)
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}' in prompt
    assert "<|tool|>\nsunny, 21 C" in prompt


def test_auto_without_a_parser_says_which_flags(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=USER, tools=TOOLS, max_tokens=4)
    assert "--enable-auto-tool-choice --tool-call-parser" in err.value.body["message"]
    assert err.value.body["param"] == "tool_choice"


def test_bad_tool_choice_is_a_400(hermes):
    with pytest.raises(openai.BadRequestError, match="not in tools"):
        hermes.chat.completions.create(
            model="tiny", messages=USER, tools=TOOLS, max_tokens=4,
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )  # fmt: skip


EXAMPLE_OUTPUT = r'\[THINK\][a-z]{1,8}\[/THINK\]<function=get_time>\{"tz": "(CET|UTC)"\}</function>'


def test_example_plugins_by_name(example):
    """The example distribution's template, tool parser and reasoning parser, from the CLI."""
    client = connect(example)
    out = client.chat.completions.create(
        model="tiny", messages=USER, tools=TOOLS, temperature=1.0, seed=0, max_tokens=80,
        extra_body={"structured_outputs": {"regex": EXAMPLE_OUTPUT}},
    ).choices[0]  # fmt: skip
    assert out.finish_reason == "tool_calls" and not out.message.content
    assert out.message.reasoning_content.isalpha()
    check_calls(out.message.tool_calls, ["get_time"])
    with example.http() as http:
        prompt = rendered(http, USER, chat_template_kwargs={"system": "Be brief."})
    assert prompt.rstrip("\n") == "<s>[SYSTEM] Be brief.\n[USER] What is the weather in Paris?"


def test_broken_plugin_is_reported_and_spares_the_others(example, broken_env, llmkit_cmd):
    listing = subprocess.run(
        [*llmkit_cmd, "plugins"], env=broken_env, capture_output=True, text=True, timeout=60
    )
    assert listing.returncode == 1
    line = next(x for x in listing.stdout.splitlines() if x.strip().startswith("broken"))
    assert "BROKEN" in line and "llmkit-broken-plugin 0.1" in line and "boom" in line
    assert "example_functions" in listing.stdout and "hermes" in listing.stdout
    started = subprocess.run(
        [*llmkit_cmd, "serve", "demo", "--enable-auto-tool-choice", "--tool-call-parser", "broken"],
        env=broken_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode != 0
    assert "--tool-call-parser" in started.stderr and "llmkit-broken-plugin" in started.stderr
    assert "broken = broken_llmkit_plugin:Parser" in started.stderr


def test_model_without_template_says_how_to_supply_one(module_server, tiny_model, tmp_path):
    server = module_server(without_template(tiny_model, tmp_path), *FLAGS)
    with pytest.raises(openai.BadRequestError, match="--chat-template") as err:
        connect(server).chat.completions.create(model="tiny", messages=USER, max_tokens=4)
    assert "no chat template" in err.value.body["message"]
