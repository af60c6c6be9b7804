"""Beam search on any engine of the protocol, as one request's stream (vLLM's
``EngineClient.beam_search``): an in-process engine, one behind a unix socket, replicas.

Each step of :class:`~llmkit.engine.beam_search.BeamSearch` is one engine request per
live beam, all started before any is awaited, so they share the engine's steps (and the
prompt's KV blocks, through the prefix cache). The stream yields one output, vLLM's
``EngineClient.beam_search``'s: the best ``beam_width`` beams as its completions, best
first. Closing the stream aborts the step in flight.
"""

from __future__ import annotations

from collections.abc import Callable

from llmkit.engine.beam_search import BeamSearch, BeamSearchParams, BeamSearchSequence
from llmkit.engine.output_stream import EngineStream
from llmkit.engine.processor import new_request_id
from llmkit.engine.protocol import EngineProtocol, OutputStream, PromptType, TokensPrompt
from llmkit.lora_request import LoRARequest
from llmkit.outputs import CompletionOutput, RequestOutput
from llmkit.sampling_params import SamplingParams

# generate(prompt, params, request_id): one engine request, started
Generate = Callable[[TokensPrompt, SamplingParams, str], OutputStream[RequestOutput]]


def start_beam_search(
    engine: EngineProtocol,
    prompt: PromptType,
    params: BeamSearchParams,
    *,
    request_id: str | None = None,
    priority: int = 0,
    lora_request: LoRARequest | None = None,
) -> OutputStream[RequestOutput]:
    """One output: the best ``params.beam_width`` beams of ``prompt`` as its completions,
    best first (:mod:`llmkit.engine.beam_search` ranks them); each step's beams are
    requests of ``engine``. Bad input raises ``ValueError`` here, as ``generate`` does."""
    tokenizer = engine.tokenizer

    def generate(
        tokens: TokensPrompt, step: SamplingParams, rid: str
    ) -> OutputStream[RequestOutput]:
        return engine.generate(
            tokens, step, request_id=rid, priority=priority, lora_request=lora_request
        )

    return BeamSearchStream(
        generate,
        engine.tokenize(prompt),
        params,
        request_id or new_request_id(),
        tokenizer.eos_token_id,
        tokenizer.decode,
    )


class BeamSearchStream(EngineStream[RequestOutput]):
    """The first step's requests start here: input the engine refuses raises at once."""

    def __init__(
        self,
        generate: Generate,
        prompt: TokensPrompt,
        params: BeamSearchParams,
        request_id: str,
        eos_token_id: int | None,
        decode: Callable[[list[int]], str],
    ):
        super().__init__()
        self._generate = generate
        self._prompt = prompt
        self._prompt_ids = list(prompt.get("prompt_token_ids") or [])
        self._search = BeamSearch([self._prompt_ids], params, eos_token_id)
        self._id = request_id
        self._eos = None if params.ignore_eos else eos_token_id
        self._decode = decode
        self._step = 0
        self._streams: list[OutputStream[RequestOutput]] = []
        self._start_step()

    @property
    def request_id(self) -> str:
        return self._id

    def _start_step(self) -> None:
        params = self._search.step_params
        for j, tokens in enumerate(self._search.pending()):
            rid = f"{self._id}-beam{self._step}-{j}"
            self._streams.append(self._generate({"prompt_token_ids": tokens}, params, rid))
        self._step += 1

    async def _next(self) -> RequestOutput:
        while self._streams:
            outputs = [await _final(stream) for stream in self._streams]
            self._streams = []
            self._search.advance(outputs)
            self._start_step()
        beams = self._search.results()[0].sequences
        return RequestOutput(
            request_id=self._id,
            prompt=self._prompt.get("prompt"),
            prompt_token_ids=self._prompt_ids,
            prompt_logprobs=None,
            outputs=[self._completion(i, beam) for i, beam in enumerate(beams)],
            finished=True,
        )

    def _completion(self, index: int, beam: BeamSearchSequence) -> CompletionOutput:
        """vLLM's: the output's tokens, its text without a final EOS."""
        tokens = beam.tokens[len(self._prompt_ids) :]
        shown = tokens[:-1] if tokens and tokens[-1] == self._eos else tokens
        return CompletionOutput(
            index=index,
            text=self._decode(shown),
            token_ids=tokens,
            cumulative_logprob=beam.cum_logprob,
            logprobs=beam.logprobs,
            finish_reason=beam.finish_reason,
        )

    def _release(self) -> None:
        for stream in self._streams:
            stream.close()
        self._streams = []


async def _final(stream: OutputStream[RequestOutput]) -> RequestOutput:
    last = None
    async for out in stream:
        last = out
    assert last is not None, "a finished request has an output"
    return last
