"""The llguidance backend on its own: compile, match, mask, roll back; and the cache."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.errors import ParamError
from llmkit.sampling_params import SamplingParams, StructuredOutputsParams
from llmkit.structured import GrammarCompiler
from llmkit.structured.bitmask import allocate_bitmask, apply_bitmask
from llmkit.structured.llguidance_backend import LLGuidanceBackend


@pytest.fixture(scope="module")
def tok(tiny_model):
    return Tokenizer(tiny_model)


@pytest.fixture(scope="module")
def backend(tok):
    return LLGuidanceBackend(tok.backend.to_str(), tok.vocab_size, tok.eos_token_id)


def _allowed(matcher, vocab_size):
    bitmask = allocate_bitmask(1, vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    logits = torch.zeros(1, vocab_size)
    apply_bitmask(logits, bitmask)
    return set(torch.nonzero(logits[0] == 0).flatten().tolist())


def test_choice_matcher_allows_only_the_choices_then_ends(tok, backend):
    matcher = backend.compile(StructuredOutputsParams(choice=["yes", "no"])).matcher()
    allowed = _allowed(matcher, tok.vocab_size)
    assert allowed and all(
        "yes".startswith(t) or "no".startswith(t) for t in map(tok.token_text, allowed)
    )
    assert tok.eos_token_id not in allowed
    for t in tok.encode("yes", add_special_tokens=False):
        assert matcher.accept(t)
    assert matcher.can_end() and matcher.is_terminated()
    assert _allowed(matcher, tok.vocab_size) == {tok.eos_token_id}


def test_rollback_returns_to_an_earlier_state(tok, backend):
    matcher = backend.compile(StructuredOutputsParams(regex="ab|cd")).matcher()
    start = _allowed(matcher, tok.vocab_size)
    ids = tok.encode("ab", add_special_tokens=False)
    for t in ids:
        assert matcher.accept(t)
    assert matcher.is_terminated()
    matcher.rollback(len(ids))
    assert not matcher.can_end() and _allowed(matcher, tok.vocab_size) == start


def test_a_refused_token_is_reported(tok, backend):
    matcher = backend.compile(StructuredOutputsParams(regex="[0-9]+")).matcher()
    assert not matcher.accept(tok.encode("x", add_special_tokens=False)[0])


def test_bitmask_beyond_the_mask_width_is_disallowed():
    bitmask = np.zeros((1, 1), dtype=np.int32)
    bitmask[0, 0] = 0b101
    logits = torch.zeros(1, 40)
    apply_bitmask(logits, bitmask)
    assert torch.nonzero(logits[0] == 0).flatten().tolist() == [0, 2]


def test_compiler_builds_its_backend_once_and_caches_by_spec(backend):
    built = []

    def make():
        built.append(1)
        return backend

    compiler = GrammarCompiler(make, capacity=2)
    a = compiler.compile(StructuredOutputsParams(json={"type": "object", "required": []}))
    assert compiler.compile(StructuredOutputsParams(json='{"required": [], "type": "object"}')) is a
    compiler.compile(StructuredOutputsParams(regex="x"))
    compiler.compile(StructuredOutputsParams(regex="y"))
    assert (
        compiler.compile(StructuredOutputsParams(json={"type": "object", "required": []})) is not a
    )
    assert built == [1]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({}, "exactly one"),
        ({"regex": "a", "grammar": "start: a"}, "exactly one"),
        ({"choice": []}, "structured_outputs.choice must be a non-empty"),
        ({"choice": ["a", 1]}, "structured_outputs.choice must hold only non-empty strings"),
        ({"choice": ["a", ""]}, "structured_outputs.choice must hold only non-empty strings"),
        ({"regex": ""}, "structured_outputs.regex must be a non-empty string"),
        ({"json": "[1,"}, "structured_outputs.json is not valid JSON"),
        ({"json": [1]}, "structured_outputs.json must be a JSON schema"),
    ],
)
def test_params_are_checked_on_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StructuredOutputsParams(**kwargs)


def test_sampling_params_take_a_dict():
    params = SamplingParams(structured_outputs={"json_object": True})
    assert params.structured_outputs == StructuredOutputsParams(json_object=True)
    assert params.structured_outputs.kind == "json_object"


def test_a_bitmask_as_wide_as_narrower_logits_gets_the_ids_it_covers(tok):
    """A tokenizer may hold more ids than the model has logits (Qwen2's adds
    <|endoftext|>): the grammar sees them all, the logits' bitmask the ids it covers."""
    ids = tok.vocab_size + 64
    backend = LLGuidanceBackend(tok.backend.to_str(), ids, tok.eos_token_id)
    matcher = backend.compile(StructuredOutputsParams(choice=["yes", "no"])).matcher()
    whole = allocate_bitmask(1, ids)
    matcher.fill_bitmask(whole, 0)
    logits = allocate_bitmask(1, tok.vocab_size)
    matcher.fill_bitmask(logits, 0)
    assert logits.shape[1] < whole.shape[1]
    assert (logits[0] == whole[0, : logits.shape[1]]).all()


@pytest.mark.parametrize("compact", [True, False])
def test_json_is_compact_unless_whitespace_is_allowed(tok, backend, compact):
    """Forced calls and json_schema answers: no free whitespace by default (a weak model
    spends its budget there); disable_any_whitespace=False (vLLM's switch) allows it."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    spec = StructuredOutputsParams(json=schema, disable_any_whitespace=compact)
    matcher = backend.compile(spec).matcher()
    assert matcher.accept(tok.encode("{", add_special_tokens=False)[0])
    blanks = {t for t in _allowed(matcher, tok.vocab_size) if not tok.token_text(t).strip()}
    assert bool(blanks) is not compact
    assert (
        spec.key() != StructuredOutputsParams(json=schema, disable_any_whitespace=not compact).key()
    )


def test_a_compile_past_the_time_limit_is_refused_and_finishes_into_the_cache(backend):
    """The request waits at most the limit; the compile goes on and a retry finds it."""
    release = threading.Event()

    class Slow:
        def compile(self, spec):
            release.wait(10)
            return backend.compile(spec)

    compiler = GrammarCompiler(Slow)
    spec = StructuredOutputsParams(regex="a+")
    with pytest.raises(ParamError, match=r"structured_outputs.regex did not compile within 0.01 s"):
        compiler.compile(spec, timeout_s=0.01)
    release.set()
    assert compiler.compile(spec) is compiler.compile(spec)
    assert compiler.compiles == 1
