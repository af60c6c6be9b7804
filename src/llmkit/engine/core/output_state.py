"""Per-request output state, and the cursors that turn it into RequestOutputs.

The core appends to a state; a reader builds an output from it whenever it is ready
to read. Whatever arrived in between is coalesced into that one output, so a slow
reader never makes the core queue anything.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field

from llmkit.engine.core.detokenizer import IncrementalDetokenizer
from llmkit.errors import LLMKitError
from llmkit.outputs import (
    CompletionOutput,
    EmbeddingOutput,
    EmbeddingRequestOutput,
    PositionLogprobs,
    RequestOutput,
    SpecDecodeCounts,
)
from llmkit.sampling_params import RequestOutputKind


@dataclass
class CompletionState:
    index: int
    detokenizer: IncrementalDetokenizer | None
    want_logprobs: bool
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    cumulative_logprob: float = 0.0
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    # What the last DELTA output covered.
    sent_tokens: int = 0
    sent_chars: int = 0
    sent_finish: bool = False

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def text(self) -> str:
        return self.detokenizer.visible_text(self.finished) if self.detokenizer else ""


class RequestState:
    """Everything produced so far for one user request (all ``n`` completions)."""

    def __init__(
        self,
        request_id: str,
        prompt: str | None,
        prompt_token_ids: list[int],
        output_kind: RequestOutputKind,
        completions: list[CompletionState],
        want_prompt_logprobs: bool = False,
        pooling: bool = False,
    ):
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.output_kind = output_kind
        self.completions = completions
        self.prompt_logprobs: list[PositionLogprobs | None] | None = (
            [None] if want_prompt_logprobs else None
        )
        self.pooling = pooling
        self.embedding: list[float] | None = None
        self.num_cached_tokens = 0
        self.spec_decode: SpecDecodeCounts | None = None
        self.error: str | None = None
        self.failure: LLMKitError | None = None  # what to raise for ``error``, if not the default
        self._sent_prompt_logprobs = False
        self._updated = False
        self.lock = threading.Lock()

    def mark_updated(self) -> None:
        """The core calls this after changing the state, so a reader knows to look."""
        with self.lock:
            self._updated = True

    @property
    def finished(self) -> bool:
        if self.pooling:
            return self.embedding is not None or self.error is not None
        return all(c.finished for c in self.completions)

    def take_output(self) -> RequestOutput | EmbeddingRequestOutput | None:
        """The output a reader should see now, or None if there is nothing new for it."""
        with self.lock:
            if not self._updated:
                return None
            self._updated = False
            if self.pooling:
                if self.embedding is None:
                    return None
                return EmbeddingRequestOutput(
                    request_id=self.request_id,
                    prompt=self.prompt,
                    prompt_token_ids=self.prompt_token_ids,
                    outputs=EmbeddingOutput(self.embedding),
                )
            finished = self.finished
            kind = self.output_kind
            if kind is RequestOutputKind.FINAL_ONLY and not finished:
                return None
            if kind is RequestOutputKind.DELTA:
                outputs = [o for c in self.completions if (o := _delta(c)) is not None]
                if not outputs and not (finished and not self._sent_prompt_logprobs):
                    return None
            else:
                outputs = [_cumulative(c) for c in self.completions]
            prompt_logprobs = self.prompt_logprobs
            if kind is RequestOutputKind.DELTA and self._sent_prompt_logprobs:
                prompt_logprobs = None
            self._sent_prompt_logprobs = True
            return RequestOutput(
                request_id=self.request_id,
                prompt=self.prompt,
                prompt_token_ids=self.prompt_token_ids,
                prompt_logprobs=prompt_logprobs,
                outputs=outputs,
                finished=finished,
                num_cached_tokens=self.num_cached_tokens,
                spec_decode=copy.copy(self.spec_decode),
            )


def _cumulative(c: CompletionState) -> CompletionOutput:
    return CompletionOutput(
        index=c.index,
        text=c.text(),
        token_ids=list(c.token_ids),
        cumulative_logprob=c.cumulative_logprob if c.want_logprobs else None,
        logprobs=list(c.logprobs) if c.want_logprobs else None,
        finish_reason=c.finish_reason,
        stop_reason=c.stop_reason,
    )


def _delta(c: CompletionState) -> CompletionOutput | None:
    text = c.text()
    new_text = text[c.sent_chars :]
    new_tokens = c.token_ids[c.sent_tokens :]
    newly_finished = c.finished and not c.sent_finish
    if not new_text and not new_tokens and not newly_finished:
        return None
    out = CompletionOutput(
        index=c.index,
        text=new_text,
        token_ids=new_tokens,
        cumulative_logprob=c.cumulative_logprob if c.want_logprobs else None,
        logprobs=c.logprobs[c.sent_tokens :] if c.want_logprobs else None,
        finish_reason=c.finish_reason,
        stop_reason=c.stop_reason,
    )
    c.sent_chars = len(text)
    c.sent_tokens = len(c.token_ids)
    c.sent_finish = c.finished
    return out
