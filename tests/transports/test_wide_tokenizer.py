"""A tokenizer with more tokens than the model has logits, as Qwen2's adds <|endoftext|>
past its config's vocab_size: structured output and forced tool calls mask the extra ids."""

from __future__ import annotations

import json
import shutil

import jsonschema
import openai
import pytest
from tokenizers import Tokenizer

from tool_helpers import TOOLS, schema_of

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"enum": ["yes", "no"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["answer", "score"],
    "additionalProperties": False,
}
USER = [{"role": "user", "content": "Is it raining?"}]


@pytest.fixture(scope="module")
def wide_model(model_factory, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("wide") / "qwen2"
    shutil.copytree(model_factory("qwen2"), path)
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.add_special_tokens(["<|endoftext|>"])
    tokenizer.save(str(path / "tokenizer.json"))
    vocab_size = json.loads((path / "config.json").read_text())["vocab_size"]
    assert tokenizer.get_vocab_size() == vocab_size + 1
    return str(path)


@pytest.fixture(scope="module")
def client(module_server, wide_model) -> openai.OpenAI:
    flags = ("--served-model-name", "wide", "--max-model-len", "1024", "--log-level", "warning")
    server = module_server(wide_model, *flags)
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)


def test_response_format_json_schema(client):
    out = client.chat.completions.create(
        model="wide", messages=USER, max_tokens=60, temperature=1.0, seed=0,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}},
    ).choices[0]  # fmt: skip
    assert out.finish_reason == "stop"
    jsonschema.validate(json.loads(out.message.content), SCHEMA)


def test_a_forced_tool_call(client):
    out = client.chat.completions.create(
        model="wide", messages=USER, tools=TOOLS, max_tokens=60, temperature=1.0, seed=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    ).choices[0]  # fmt: skip
    assert out.finish_reason == "tool_calls"
    [call] = out.message.tool_calls
    jsonschema.validate(json.loads(call.function.arguments), schema_of("get_weather"))
