"""The llguidance backend: JSON schema, regex, choice and Lark/GBNF grammars."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import llguidance
import llguidance.numpy
import numpy as np
from llguidance import LLMatcher, LLTokenizer
from numpy.typing import NDArray

from llmkit.errors import ParamError
from llmkit.sampling_params import StructuredOutputsParams
from llmkit.structured.bitmask import allocate_bitmask

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

# Compact JSON (", " and ": ", no other whitespace) unless a spec asks for free whitespace
# (disable_any_whitespace=False): it lets a small model spend its budget on blanks.
_JSON_OPTIONS: JsonCompileOptions = {
    "whitespace_flexible": False,
    "item_separator": ", ",
    "key_separator": ": ",
}


class LLGuidanceBackend:
    """Compiles specs against one tokenizer's vocabulary.

    ``tokenizer_json`` is the tokenizer's ``tokenizer.json`` text; ``vocab_size`` is the
    number of token ids a grammar may name: the larger of the model's logits' width and the
    tokenizer's size (Qwen2's tokenizer adds ``<|endoftext|>`` past its config's
    vocab_size). A bitmask as wide as the logits gets the ids past them left out.
    """

    def __init__(self, tokenizer_json: str, vocab_size: int, eos_token_id: int | None):
        self.tokenizer = LLTokenizer(tokenizer_json, n_vocab=vocab_size, eos_token=eos_token_id)
        self._vocab_size = vocab_size

    def compile(self, spec: StructuredOutputsParams) -> LLGuidanceGrammar:
        field = f"structured_outputs.{spec.kind}"
        try:
            grammar = _grammar_text(spec)
        except (ValueError, TypeError) as exc:
            raise ParamError("structured_outputs", f"{field} is invalid: {exc}") from None
        is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar, self.tokenizer)
        if is_error:
            raise ParamError("structured_outputs", f"{field} is invalid: {messages[0]}")
        template = LLMatcher(self.tokenizer, grammar, log_level=0)
        if template.is_error():
            raise ParamError("structured_outputs", f"{field} is invalid: {template.get_error()}")
        return LLGuidanceGrammar(template, self._vocab_size)


class LLGuidanceGrammar:
    """A compiled grammar; each matcher is a cheap copy of the one compiled at the start."""

    def __init__(self, template: LLMatcher, vocab_size: int):
        self._template = template
        self._vocab_size = vocab_size

    def matcher(self) -> LLGuidanceMatcher:
        return LLGuidanceMatcher(self._template.deep_copy(), self._vocab_size)


class LLGuidanceMatcher:
    def __init__(self, matcher: LLMatcher, vocab_size: int):
        self._matcher = matcher
        self._vocab_size = vocab_size

    def accept(self, token_id: int) -> bool:
        return self._matcher.consume_token(token_id)

    def fill_bitmask(self, bitmask: NDArray[np.int32], row: int) -> None:
        words = bitmask.shape[1]
        if words * 32 >= self._vocab_size:
            llguidance.numpy.fill_next_token_bitmask(self._matcher, bitmask, row)
            return
        # Narrower than the tokenizer (as wide as the logits): the ids past it are dropped.
        wide = allocate_bitmask(1, self._vocab_size)
        llguidance.numpy.fill_next_token_bitmask(self._matcher, wide, 0)
        bitmask[row] = wide[0, :words]

    def rollback(self, num_tokens: int) -> None:
        if not self._matcher.rollback(num_tokens):
            raise ValueError(f"cannot roll back {num_tokens} tokens: {self._matcher.get_error()}")

    def is_terminated(self) -> bool:
        return self._matcher.is_stopped()

    def can_end(self) -> bool:
        return self._matcher.is_accepting()


def _grammar_text(spec: StructuredOutputsParams) -> str:
    """The llguidance grammar of ``spec``; ValueError if it cannot be built."""
    options: JsonCompileOptions = {
        **_JSON_OPTIONS,
        "whitespace_flexible": not spec.disable_any_whitespace,
    }
    if spec.json is not None:
        return LLMatcher.grammar_from_json_schema(json.dumps(spec.json), defaults=options)
    if spec.json_object:
        return LLMatcher.grammar_from_json_schema('{"type": "object"}', defaults=options)
    if spec.regex is not None:
        return LLMatcher.grammar_from_regex(spec.regex)
    if spec.choice is not None:
        return llguidance.grammar_from("choice", json.dumps(spec.choice))
    assert spec.grammar is not None
    return llguidance.grammar_from("grammar", spec.grammar)
