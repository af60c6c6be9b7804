"""Beam search over the engine, as vLLM's ``LLM.beam_search`` does it.

Each step asks the engine for one token of every live beam with its top ``2 * beam_width``
logprobs; the beams share their prompt's (and common prefix's) KV blocks through the
prefix cache, so a step computes only what a beam added. Beams are ranked by vLLM's
length-penalty convention: ``cum_logprob / len(tokens) ** length_penalty``, where
``tokens`` is the prompt plus the output, without a final EOS. A beam that ends in EOS
(unless ``ignore_eos``) is finished; the best ``beam_width`` of the finished and the
live beams are returned, best first.

:class:`BeamSearch` is the search itself, fed one step's outputs at a time; the blocking
driver (:func:`beam_search`, for ``LLM``) and the async one (``BeamSearchStream``, for
every engine of the protocol) only run its steps on an engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llmkit.outputs import PositionLogprobs, RequestOutput
from llmkit.sampling_params import RequestOutputKind, SamplingParams

_EARLY_STOPPING = (None, True, False, "never")


@dataclass
class BeamSearchParams:
    """vLLM's beam-search parameters.

    ``early_stopping`` (vLLM's older ``SamplingParams`` field, as the OpenAI server takes
    it) applies once ``beam_width`` beams have finished: True stops then; False stops when
    the best live beam's score now is no better than the worst of those; "never" stops
    only when no live beam can beat it at any length. None (the default, as ``LLM``'s
    beam search in vLLM) grows the live beams to ``max_tokens``.
    """

    beam_width: int
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 0.0
    length_penalty: float = 1.0
    include_stop_str_in_output: bool = False
    early_stopping: bool | str | None = None

    def __post_init__(self) -> None:
        for name in ("beam_width", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.early_stopping not in _EARLY_STOPPING:
            raise ValueError(
                f"early_stopping must be true, false or 'never', got {self.early_stopping!r}"
            )


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
    return _penalized(cum_logprob, length, length_penalty)


def _penalized(cum_logprob: float, length: int, length_penalty: float) -> float:
    """``cum_logprob / length ** length_penalty``; where the power leaves float's range (a
    huge penalty, either sign), the score's limit rather than an error."""
    try:
        return cum_logprob / (length**length_penalty)
    except OverflowError:  # the power is past float's largest: the score tends to 0
        return 0.0
    except ZeroDivisionError:  # it underflowed to 0; a log-probability is never positive
        return -math.inf if cum_logprob < 0 else 0.0


class BeamSearch:
    """The beams of many prompts: :meth:`pending` names the sequences to extend by one
    token, :meth:`advance` takes the engine's output for each, :meth:`results` ends it."""

    def __init__(
        self, prompts: Sequence[list[int]], params: BeamSearchParams, eos_token_id: int | None
    ):
        self.params = params
        self.eos_token_id = eos_token_id
        # One token with the candidates' logprobs; the EOS is judged here, not by the engine.
        self.step_params = SamplingParams(
            temperature=params.temperature,
            max_tokens=1,
            logprobs=2 * params.beam_width,
            ignore_eos=True,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        self._live = [[BeamSearchSequence(list(p))] for p in prompts]
        self._done: list[list[BeamSearchSequence]] = [[] for _ in prompts]
        self._max_lens = [len(p) + params.max_tokens for p in prompts]
        self._steps = 0

    def score(self, beam: BeamSearchSequence, length: int | None = None) -> float:
        """``beam``'s score, or the score it would have at ``length`` tokens."""
        penalty = self.params.length_penalty
        if length is not None:
            return _penalized(beam.cum_logprob, length, penalty)
        return beam_score(beam.tokens, beam.cum_logprob, self.eos_token_id, penalty)

    def pending(self) -> list[list[int]]:
        """The token ids of every live beam, in order; none when the search is over."""
        if self._steps >= self.params.max_tokens:
            return []
        return [beam.tokens for beams in self._live for beam in beams]

    def advance(self, outputs: Sequence[RequestOutput]) -> None:
        """One output per sequence :meth:`pending` named, each with one token's logprobs."""
        outs = iter(outputs)
        width = self.params.beam_width
        for i, beams in enumerate(self._live):
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
                    if token == self.eos_token_id and not self.params.ignore_eos:
                        new.finish_reason = "stop"
                        self._done[i].append(new)
                    else:
                        grown.append(new)
            self._live[i] = sorted(grown, key=self.score, reverse=True)[:width]
            if self._live[i] and self._stops_early(i):
                self._live[i] = []
        self._steps += 1

    def _stops_early(self, i: int) -> bool:
        """vLLM's (and transformers') early-stopping rule, once ``beam_width`` are done."""
        rule, width = self.params.early_stopping, self.params.beam_width
        if rule is None or len(self._done[i]) < width:
            return False
        if rule is True:
            return True
        worst = sorted(map(self.score, self._done[i]), reverse=True)[width - 1]
        best = self._live[i][0]
        if rule == "never" and self.params.length_penalty > 0:
            # Logprobs only lower the sum, so the longest a beam can grow is its best case.
            return worst >= self.score(best, self._max_lens[i])
        return worst >= self.score(best)

    def results(self) -> list[BeamSearchOutput]:
        """The best ``beam_width`` beams of each prompt, finished or cut at the length."""
        out = []
        for beams, finished in zip(self._live, self._done):
            for beam in beams:
                beam.finish_reason = "length"
            best = sorted(finished + beams, key=self.score, reverse=True)
            out.append(BeamSearchOutput(best[: self.params.beam_width]))
        return out


def beam_search(
    generate: Callable[[list[list[int]], SamplingParams], list[RequestOutput]],
    prompts: Sequence[list[int]],
    params: BeamSearchParams,
    eos_token_id: int | None,
    decode: Callable[[list[int]], str],
) -> list[BeamSearchOutput]:
    """``generate(token id lists, params)``: one engine pass over many prompts."""
    search = BeamSearch(prompts, params, eos_token_id)
    while batch := search.pending():
        search.advance(generate(batch, search.step_params))
    results = search.results()
    for result in results:
        for beam in result.sequences:
            beam.text = decode(beam.tokens)  # vLLM's: the prompt's text and the output's
    return results
