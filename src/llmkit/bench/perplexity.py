"""Perplexity of a model on a text, from the engine's ``prompt_logprobs``.

The text is tokenized whole, then cut into windows the engine can take: at most
``max_model_len - 1`` tokens each (a prompt must leave room for one generated token).
Consecutive windows share one token: the last token of a window is the first of the next,
where it is context only. So every token but the text's first is scored exactly once, and
no scored token sees context from before its own window (non-overlapping contexts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmkit.engine.llm import LLM


@dataclass
class PerplexityResult:
    model: str
    tokens: int  # scored tokens: every token of the text but its first
    windows: int
    nll: float  # the sum of the scored tokens' negative logprobs

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll / self.tokens)

    def report(self) -> str:
        return (
            f"model {self.model}: {self.tokens} tokens scored in {self.windows} windows, "
            f"perplexity {self.perplexity:.4f}"
        )


def windows(ids: list[int], size: int) -> list[list[int]]:
    """``ids`` in windows of at most ``size`` tokens, each starting on the last of the one
    before; ``ValueError`` if there is nothing to score (fewer than two tokens)."""
    if size < 2:
        raise ValueError(f"a window must hold at least 2 tokens, got {size}")
    if len(ids) < 2:
        raise ValueError(f"the text is {len(ids)} token(s) long; perplexity needs at least 2")
    return [ids[start : start + size] for start in range(0, len(ids) - 1, size - 1)]


def perplexity(llm: LLM, text: str, model: str = "") -> PerplexityResult:
    """``text``'s perplexity under ``llm``'s model: exp of the mean negative logprob."""
    from llmkit.sampling_params import SamplingParams

    ids = llm.get_tokenizer().encode(text)
    chunks = windows(ids, llm.model_info.max_model_len - 1)
    params = SamplingParams(prompt_logprobs=0, max_tokens=1, temperature=0.0)
    prompts: list[Any] = [{"prompt_token_ids": chunk} for chunk in chunks]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    nll = 0.0
    for chunk, output in zip(chunks, outputs):
        assert output.prompt_logprobs is not None
        # position 0 has no logprob (nothing before it); each other holds its own token's
        for token, position in zip(chunk[1:], output.prompt_logprobs[1:], strict=True):
            assert position is not None
            nll -= position[token].logprob
    return PerplexityResult(model, len(ids) - 1, len(chunks), nll)


def measure_perplexity(model: str, text: str, engine_kwargs: dict[str, Any]) -> PerplexityResult:
    """``text``'s perplexity under ``model``, loaded with ``engine_kwargs``."""
    from llmkit.engine.llm import LLM

    return perplexity(LLM(model, **engine_kwargs), text, model)
