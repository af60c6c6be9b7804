"""Structured outputs on a random-weight model at temperature 1.0, where unconstrained
text is never valid JSON: every constrained output must still parse and match."""

from __future__ import annotations

import json
import re

import anyio
import jsonschema
import pytest

from llmkit import LLM, AsyncEngine, EngineConfig, SamplingParams
from llmkit.sampling_params import RequestOutputKind
from llmkit.sampling_params import StructuredOutputsParams as Structured

# Strings, arrays and numbers are bounded: a random model closes an open-ended string
# only by chance, and would spend its whole budget in one.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "score": {"type": "number", "minimum": -1, "maximum": 1},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 10},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "required": ["city", "zip"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "score", "color", "tags", "address"],
    "additionalProperties": False,
}
REGEX = r"[a-z]{2,8}@[a-z]{2,6}\.(com|org)"
CHOICES = ["yes", "no", "maybe so", "n/a"]


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model)


def _texts(outs):
    return [o.outputs[0].text for o in outs]


def _run(llm, spec, num, max_tokens=400, **kwargs):
    params = [
        SamplingParams(max_tokens=max_tokens, seed=i, structured_outputs=spec, **kwargs)
        for i in range(num)
    ]
    outs = llm.generate([f"Request {i}:" for i in range(num)], params, use_tqdm=False)
    assert [o.outputs[0].finish_reason for o in outs] == ["stop"] * num
    return outs


def test_json_schema_outputs_parse_and_validate(llm):
    for text in _texts(_run(llm, Structured(json=SCHEMA), 50)):
        jsonschema.validate(json.loads(text), SCHEMA)


def test_unconstrained_outputs_are_not_json(llm):
    outs = llm.generate(["Request:"] * 5, SamplingParams(max_tokens=40, seed=0), use_tqdm=False)
    for text in _texts(outs):
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)


def test_json_object_outputs_parse(llm):
    # A nudge towards '"' and '}' lets the random model close the strings it opens; the
    # grammar alone decides what is valid.
    tok = llm._core.tokenizer
    bias = {t: 5.0 for t in range(tok.vocab_size) if set(tok.token_text(t)) & set('"}')}
    outs = _run(llm, Structured(json_object=True), 20, logit_bias=bias)
    for text in _texts(outs):
        assert isinstance(json.loads(text), dict)


def test_regex_outputs_match(llm):
    for text in _texts(_run(llm, Structured(regex=REGEX), 20)):
        assert re.fullmatch(REGEX, text), text


def test_choice_outputs_are_choices(llm):
    texts = _texts(_run(llm, Structured(choice=CHOICES), 20))
    assert set(texts) <= set(CHOICES)


@pytest.mark.parametrize(
    "grammar",
    ['start: "x=" NUM ";"\nNUM: /[0-9]{1,3}/', 'root ::= "on" | "off"'],
    ids=["lark", "gbnf"],
)
def test_grammar_outputs_match(llm, grammar):
    for text in _texts(_run(llm, Structured(grammar=grammar), 10)):
        assert re.fullmatch(r"x=[0-9]{1,3};|on|off", text), text


def test_a_grammar_that_cannot_finish_in_max_tokens_ends_with_length(llm):
    out = llm.generate(
        "Hi", SamplingParams(max_tokens=3, structured_outputs={"regex": "[a-z]{60}"})
    )
    assert out[0].outputs[0].finish_reason == "length"
    assert re.fullmatch("[a-z]+", out[0].outputs[0].text)


def test_stop_strings_still_apply(llm):
    params = SamplingParams(
        max_tokens=400, seed=1, stop=[", "], structured_outputs={"json": SCHEMA}
    )
    out = llm.generate("Request:", params, use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "stop" and out.stop_reason == ", "
    assert out.text.startswith('{"name": ')


def test_n_children_each_follow_the_grammar_and_seeds_repeat(llm):
    params = SamplingParams(n=4, max_tokens=400, seed=7, structured_outputs={"json": SCHEMA})
    first = llm.generate("Request:", params, use_tqdm=False)[0]
    again = llm.generate("Request:", params, use_tqdm=False)[0]
    texts = [c.text for c in first.outputs]
    assert texts == [c.text for c in again.outputs]
    assert len(set(texts)) > 1
    for text in texts:
        jsonschema.validate(json.loads(text), SCHEMA)


def test_mixed_batch_leaves_unconstrained_requests_alone(llm):
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    plain = [f"plain prompt {i} " + "word " * i for i in range(4)]
    alone = [o.outputs[0].token_ids for o in llm.generate(plain, greedy, use_tqdm=False)]
    constrained = SamplingParams(max_tokens=300, seed=3, structured_outputs={"json": SCHEMA})
    prompts = [p for pair in zip(plain, ["Request:"] * 4) for p in pair]
    params = [p for _ in plain for p in (greedy, constrained)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs[0::2]] == alone
    for text in _texts(outs[1::2]):
        jsonschema.validate(json.loads(text), SCHEMA)


def test_preemption_chunked_prefill_and_prefix_cache_keep_grammars_in_step(tiny_model, llm):
    prompt = "A shared prefix that spans several blocks of the KV cache, " * 3
    params = [
        SamplingParams(max_tokens=300, seed=i, structured_outputs={"json": SCHEMA})
        for i in range(12)
    ]
    reference = _texts(llm.generate([prompt] * 12, params, use_tqdm=False))
    tight = LLM(tiny_model, max_model_len=512, num_kv_blocks=40, max_num_batched_tokens=32)
    outs = tight.generate([prompt] * 12, params, use_tqdm=False)
    assert tight.stats().num_preemptions > 0
    assert any(o.num_cached_tokens > 0 for o in outs)
    assert _texts(outs) == reference
    for text in reference:
        jsonschema.validate(json.loads(text), SCHEMA)


@pytest.mark.parametrize(
    "spec,field,words",
    [
        ({"json": {"type": "foo"}}, "structured_outputs.json", "foo"),
        ({"json": "{not json"}, "structured_outputs.json", "not valid JSON"),
        ({"regex": "(a"}, "structured_outputs.regex", "unclosed group"),
        ({"grammar": "start: foo"}, "structured_outputs.grammar", "unknown name"),
        ({"grammar": "root ::= ("}, "structured_outputs.grammar", "GBNF"),
        ({"choice": []}, "structured_outputs.choice", "non-empty"),
        ({"regex": "a", "choice": ["a"]}, "structured_outputs", "exactly one"),
        ({"jsn": {}}, "structured_outputs", "unknown fields"),
    ],
)
def test_bad_specs_are_value_errors_naming_the_field(llm, spec, field, words):
    with pytest.raises(ValueError, match=re.escape(field)) as info:
        llm.generate("Hi", SamplingParams(structured_outputs=spec), use_tqdm=False)
    assert words in str(info.value)
    assert not llm._core.has_work()


def test_compiled_grammars_are_cached_by_spec(llm):
    grammars = llm._processor.grammars
    first = grammars.compile(Structured(json=dict(SCHEMA)))
    assert grammars.compile(Structured(json=json.dumps(SCHEMA))) is first


@pytest.mark.anyio
async def test_streamed_text_equals_the_final_text(tiny_model):
    async def collect(engine, kind):
        params = SamplingParams(
            max_tokens=400, seed=5, output_kind=kind, structured_outputs={"json": SCHEMA}
        )
        text = ""
        async for out in engine.generate("Request:", params):
            text = (
                text + out.outputs[0].text
                if kind is RequestOutputKind.DELTA
                else (out.outputs[0].text)
            )
        return text

    async with AsyncEngine(EngineConfig(tiny_model)) as engine:
        with anyio.fail_after(60):
            streamed = await collect(engine, RequestOutputKind.DELTA)
            final = await collect(engine, RequestOutputKind.FINAL_ONLY)
    assert streamed == final
    jsonschema.validate(json.loads(final), SCHEMA)
