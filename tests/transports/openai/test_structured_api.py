"""Structured outputs through a real `llmkit serve` and the official openai client:
``response_format`` on chat, vLLM's ``structured_outputs`` on completions and chat."""

from __future__ import annotations

import json
import re

import jsonschema
import openai
import pytest

from llmkit.engine.core.tokenizer import Tokenizer

MODEL = "tiny"
USER = [{"role": "user", "content": "Describe a person."}]
# Bounded, so that a random model finishes it well within the server's 256-token context.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
        "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 2},
        "home": {
            "type": "object",
            "properties": {"zip": {"type": "string", "pattern": "^[0-9]{4}$"}},
            "required": ["zip"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "pets", "home"],
    "additionalProperties": False,
}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}


def test_chat_response_format_json_schema(client):
    for seed in range(8):
        out = client.chat.completions.create(
            model=MODEL, messages=USER, temperature=1.0, seed=seed, max_tokens=150,
            response_format=JSON_SCHEMA,
        )  # fmt: skip
        assert out.choices[0].finish_reason == "stop", out.choices[0].message.content
        jsonschema.validate(json.loads(out.choices[0].message.content), SCHEMA)


def test_chat_response_format_json_object(client, tiny_model):
    # Nudged towards '"' and '}', so that the random model closes the strings it opens.
    tok = Tokenizer(tiny_model)
    bias = {str(t): 5 for t in range(tok.vocab_size) if set(tok.token_text(t)) & set('"}')}
    for seed in range(5):
        out = client.chat.completions.create(
            model=MODEL, messages=USER, temperature=1.0, seed=seed, max_tokens=150,
            logit_bias=bias, response_format={"type": "json_object"},
        )  # fmt: skip
        assert isinstance(json.loads(out.choices[0].message.content), dict)


def test_chat_stream_equals_non_stream(client):
    kwargs = dict(
        model=MODEL, messages=USER, temperature=1.0, seed=3, max_tokens=150,
        response_format=JSON_SCHEMA,
    )  # fmt: skip
    full = client.chat.completions.create(**kwargs).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == full
    jsonschema.validate(json.loads(full), SCHEMA)


def test_completions_structured_outputs(client):
    regex = r"[a-z]{2,6}-[0-9]{2}"
    out = client.completions.create(
        model=MODEL, prompt="Code:", n=4, seed=0, max_tokens=30,
        extra_body={"structured_outputs": {"regex": regex}},
    )  # fmt: skip
    assert all(re.fullmatch(regex, c.text) for c in out.choices)
    out = client.completions.create(
        model=MODEL, prompt="Answer:", n=4, seed=0, max_tokens=30,
        extra_body={"structured_outputs": {"choice": ["alpha", "beta"]}},
    )  # fmt: skip
    assert {c.text for c in out.choices} <= {"alpha", "beta"}


def test_chat_structured_outputs_extra(client):
    out = client.chat.completions.create(
        model=MODEL, messages=USER, max_tokens=30,
        extra_body={"structured_outputs": {"grammar": 'start: "ok" | "not ok"'}},
    )  # fmt: skip
    assert out.choices[0].message.content in {"ok", "not ok"}


@pytest.mark.parametrize(
    "kind,body,param,words",
    [
        ("chat", {"response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "nope"}}}}, "response_format", "nope"),
        ("chat", {"response_format": {"type": "json_schema"}}, "response_format", "required"),
        ("chat", {"response_format": {"type": "xml"}}, "response_format", "response_format"),
        ("chat", {"response_format": {"type": "json_object"},
                  "structured_outputs": {"regex": "a"}}, "response_format", "both"),
        ("chat", {"structured_outputs": {"regex": "(a"}}, "structured_outputs", "regex"),
        ("completions", {"structured_outputs": {"choice": []}}, "structured_outputs", "choice"),
        ("completions", {"structured_outputs": {"grammar": "start: x"}}, "structured_outputs",
         "grammar"),
        ("completions", {"structured_outputs": "json"}, "structured_outputs", "structured"),
    ],
)  # fmt: skip
def test_bad_specs_are_400s_naming_the_field(client, kind, body, param, words):
    if kind == "chat":
        create = lambda: client.chat.completions.create(  # noqa: E731
            model=MODEL, messages=USER, extra_body=body
        )
    else:
        create = lambda: client.completions.create(  # noqa: E731
            model=MODEL, prompt="a", extra_body=body
        )
    with pytest.raises(openai.BadRequestError) as bad:
        create()
    assert bad.value.body["param"] == param
    assert words in bad.value.body["message"]
