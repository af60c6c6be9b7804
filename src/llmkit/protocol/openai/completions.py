"""/v1/completions: the request, the response and its stream chunk."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from llmkit.protocol.openai.common import (
    ChoicesResponse,
    Count,
    NonNegativeInt,
    PositiveInt,
    PromptInput,
    SamplingFields,
    SparseModel,
    UsageInfo,
    now_seconds,
)


class CompletionRequest(SamplingFields):
    prompt: PromptInput
    max_tokens: PositiveInt | None = 16
    logprobs: NonNegativeInt | None = None
    best_of: Count | None = Field(
        default=None,
        description="Must equal n when given; with use_beam_search, the number of beams "
        "(at least n).",
    )
    suffix: str | None = Field(
        default=None,
        description="The text after the completion (code completion, fill in the middle); "
        "only for a model that can insert (its /v1/models capabilities), else a 400.",
    )
    use_beam_search: bool = Field(
        default=False,
        description="vLLM's beam search: the best n of best_of (or n) beams as the choices. "
        "Not with stream; each beam reads twice the beams' number of logprobs a step, which "
        "must be within the engine's max_logprobs.",
    )
    length_penalty: float = 1.0
    early_stopping: bool | None = None


class CompletionLogprobs(BaseModel):
    text_offset: list[int] = Field(default_factory=list)
    token_logprobs: list[float | None] = Field(default_factory=list)
    tokens: list[str] = Field(default_factory=list)
    top_logprobs: list[dict[str, float] | None] = Field(default_factory=list)


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None
    # vLLM's extension: the stop string or token id that ended the choice.
    stop_reason: int | str | None = None


class CompletionResponse(ChoicesResponse[CompletionChoice]):
    object: Literal["text_completion"] = "text_completion"


class CompletionChunk(SparseModel):
    _omit_unless_set = frozenset({"usage"})

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(default_factory=now_seconds)
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo | None = None
