"""Client-side outputs of one request: the engine's deltas merged into what its reader asked for.

A remote engine always streams deltas (or only the final output); this turns them back
into cumulative outputs, or merges the deltas that arrived while the reader was away, so
a slow reader holds one output per request, never a queue of them.
"""

from __future__ import annotations

import dataclasses

from llmkit.engine.protocol import EngineOutput
from llmkit.outputs import CompletionOutput, EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, RequestOutputKind, SamplingParams


def wire_params(params: SamplingParams | PoolingParams) -> SamplingParams | PoolingParams:
    """The params to send: cumulative outputs are rebuilt here from deltas, not sent whole."""
    if isinstance(params, SamplingParams) and params.output_kind is RequestOutputKind.CUMULATIVE:
        return dataclasses.replace(params, output_kind=RequestOutputKind.DELTA)
    return params


class OutputAssembler:
    """A request's outputs as they arrive (:meth:`add`), as its reader takes them (:meth:`take`)."""

    def __init__(self, params: SamplingParams | PoolingParams):
        self._cumulative = (
            isinstance(params, SamplingParams)
            and params.output_kind is RequestOutputKind.CUMULATIVE
        )
        self._pending: EngineOutput | None = None
        self._prompt: str | None = None
        self._prompt_token_ids: list[int] = []
        if isinstance(params, SamplingParams) and self._cumulative:
            want_logprobs = params.logprobs is not None
            # As AsyncEngine reports a completion that has no tokens yet.
            self._completions = [
                CompletionOutput(
                    i, "", [], 0.0 if want_logprobs else None, [] if want_logprobs else None
                )
                for i in range(params.n)
            ]
            self._prompt_logprobs: list | None = (
                [None] if params.prompt_logprobs is not None else None
            )

    def add(self, output: EngineOutput) -> None:
        """One output from the engine: a delta, a final-only output, or an embedding."""
        if output.prompt_token_ids:
            self._prompt, self._prompt_token_ids = output.prompt, output.prompt_token_ids
        if isinstance(output, EmbeddingRequestOutput):
            self._pending = output
            return
        if self._cumulative:
            self._accumulate(output)
        elif isinstance(self._pending, RequestOutput):
            _merge(self._pending, output)
        else:
            self._pending = output

    def take(self) -> EngineOutput | None:
        """What the reader gets now, or None if nothing arrived since it last took."""
        output, self._pending = self._pending, None
        if output is None:
            return None
        output.prompt, output.prompt_token_ids = self._prompt, self._prompt_token_ids
        if isinstance(output, RequestOutput) and self._cumulative:
            output.outputs = [_copy(c) for c in self._completions]
            output.prompt_logprobs = self._prompt_logprobs
        return output

    def _accumulate(self, delta: RequestOutput) -> None:
        for new in delta.outputs:
            c = self._completions[new.index]
            c.text += new.text
            c.token_ids.extend(new.token_ids)
            if c.logprobs is not None and new.logprobs is not None:
                c.logprobs.extend(new.logprobs)
            c.cumulative_logprob = new.cumulative_logprob
            c.finish_reason, c.stop_reason = new.finish_reason, new.stop_reason
        if delta.prompt_logprobs is not None:
            self._prompt_logprobs = delta.prompt_logprobs
        # The delta's completions are copied out at take(); the rest of it is the latest.
        self._pending = dataclasses.replace(delta, outputs=[])


def _merge(into: RequestOutput, delta: RequestOutput) -> None:
    """Fold a later delta into one the reader has not taken yet."""
    by_index = {c.index: c for c in into.outputs}
    for new in delta.outputs:
        c = by_index.get(new.index)
        if c is None:
            into.outputs.append(new)
            continue
        c.text += new.text
        c.token_ids = c.token_ids + new.token_ids
        if new.logprobs is not None:
            c.logprobs = (c.logprobs or []) + new.logprobs
        c.cumulative_logprob = new.cumulative_logprob
        c.finish_reason, c.stop_reason = new.finish_reason, new.stop_reason
    into.outputs.sort(key=lambda c: c.index)
    if delta.prompt_logprobs is not None:
        into.prompt_logprobs = delta.prompt_logprobs
    into.finished = delta.finished
    into.num_cached_tokens = delta.num_cached_tokens
    into.spec_decode = delta.spec_decode  # the request's counts so far, not a delta


def _copy(c: CompletionOutput) -> CompletionOutput:
    return dataclasses.replace(
        c, token_ids=list(c.token_ids), logprobs=None if c.logprobs is None else list(c.logprobs)
    )
