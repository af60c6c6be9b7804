"""Beam search over the engine, as vLLM's ``LLM.beam_search`` does it.

Each step asks the engine for one token of every live beam with its top ``2 * beam_width``
logprobs; the beams share their prompt's (and common prefix's) KV blocks through the
prefix cache, so a step computes only what a beam added. Beams are ranked by vLLM's
length-penalty convention: ``cum_logprob / len(tokens) ** length_penalty``, where
``tokens`` is the prompt plus the output, without a final EOS. A beam that ends in EOS
(unless ``ignore_eos``) is finished; the best ``beam_width`` of the finished and the
live beams are returned, best first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llmkit.outputs import PositionLogprobs, RequestOutput
from llmkit.sampling_params import SamplingParams


@dataclass
class BeamSearchParams:
    """vLLM's beam-search parameters."""

    beam_width: int
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 0.0
    length_penalty: float = 1.0
    include_stop_str_in_output: bool = False

    def __post_init__(self) -> None:
        for name in ("beam_width", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")


@dataclass
class BeamSearchSequence:
    """One beam: the prompt and output ``tokens``, each output position's logprobs."""

    tokens: list[int]
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    cum_logprob: float = 0.0
    text: str | None = None
    finish_reason: str | None = None


@dataclass
class BeamSearchOutput:
    """The best ``beam_width`` beams of one prompt, best first."""

    sequences: list[BeamSearchSequence]


def beam_score(
    tokens: list[int], cum_logprob: float, eos_token_id: int | None, length_penalty: float
) -> float:
    """vLLM's ``get_beam_search_score``."""
    length = len(tokens) - (1 if tokens and tokens[-1] == eos_token_id else 0)
    return cum_logprob / (length**length_penalty)


def beam_search(
    generate: Callable[[list[list[int]], SamplingParams], list[RequestOutput]],
    prompts: Sequence[list[int]],
    params: BeamSearchParams,
    eos_token_id: int | None,
    decode: Callable[[list[int]], str],
) -> list[BeamSearchOutput]:
    """``generate(token id lists, params)``: one engine pass over many prompts."""
    width = params.beam_width
    step = SamplingParams(
        temperature=params.temperature, max_tokens=1, logprobs=2 * width, ignore_eos=True
    )

    def score(beam: BeamSearchSequence) -> float:
        return beam_score(beam.tokens, beam.cum_logprob, eos_token_id, params.length_penalty)

    live = [[BeamSearchSequence(list(p))] for p in prompts]
    done: list[list[BeamSearchSequence]] = [[] for _ in prompts]
    for _ in range(params.max_tokens):
        flat = [beam for beams in live for beam in beams]
        if not flat:
            break
        outs = iter(generate([beam.tokens for beam in flat], step))
        for i, beams in enumerate(live):
            grown = []
            for beam in beams:
                position = next(outs).outputs[0].logprobs
                assert position, "beam search asks for logprobs"
                for token, lp in position[0].items():
                    new = BeamSearchSequence(
                        [*beam.tokens, token],
                        [*beam.logprobs, position[0]],
                        beam.cum_logprob + lp.logprob,
                    )
                    if token == eos_token_id and not params.ignore_eos:
                        new.finish_reason = "stop"
                        done[i].append(new)
                    else:
                        grown.append(new)
            live[i] = sorted(grown, key=score, reverse=True)[:width]
    results = []
    for beams, finished in zip(live, done):
        for beam in beams:
            beam.finish_reason = "length"
        best = sorted(finished + beams, key=score, reverse=True)[:width]
        for beam in best:
            beam.text = decode(beam.tokens)  # vLLM's: the prompt's text and the output's
        results.append(BeamSearchOutput(best))
    return results
