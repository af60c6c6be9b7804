"""What the engine returns: RequestOutput with CompletionOutputs, and embedding results."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Logprob:
    """One token's log-probability, its rank in the vocabulary (1 = most likely), its text."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# One position: token id -> Logprob (the sampled or actual token plus the top-k).
PositionLogprobs = dict[int, Logprob]


@dataclass
class CompletionOutput:
    """One of a request's ``n`` completions."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[PositionLogprobs] | None
    finish_reason: str | None = None  # "stop", "length" or "abort"
    stop_reason: int | str | None = None  # the stop string or stop token id that ended it

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class SpecDecodeCounts:
    """Speculative decoding for one request: steps that checked proposals (``num_drafts``),
    tokens proposed, proposals the model accepted, and tokens those steps emitted."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_emitted_tokens: int = 0


@dataclass
class RequestOutput:
    """The state of one generation request, as streamed or at its end."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    prompt_logprobs: list[PositionLogprobs | None] | None
    outputs: list[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0
    spec_decode: SpecDecodeCounts | None = None  # set when speculative decoding is on


@dataclass
class EmbeddingOutput:
    """An embedding, as vLLM's ``EmbeddingRequestOutput.outputs`` carries it."""

    embedding: list[float]

    @property
    def hidden_size(self) -> int:
        return len(self.embedding)


@dataclass
class EmbeddingRequestOutput:
    """The result of one embedding request."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: EmbeddingOutput
    finished: bool = True
