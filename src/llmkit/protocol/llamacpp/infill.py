"""llama-server's /infill: the text around the cursor, other files of the repository, and the
completion in its /completion shape (llama.vim and llama.vscode send and read these)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field

from llmkit.protocol.openai.common import (
    INT64_MAX,
    NonEmpty,
    NonNegativeInt,
    RequestBody,
    Seed,
    integral,
)

StopType = Literal["none", "eos", "limit", "word"]


class ExtraChunk(BaseModel):
    """Another file of the repository, put before the one being completed."""

    text: str
    filename: str = "tmp"


class InfillRequest(RequestBody):
    """llama-server's fields and defaults; the rest of what editors send (``cache_prompt``,
    ``samplers``, ``t_max_*_ms``, ...) is accepted and ignored."""

    model: str | None = None  # with several models: which
    input_prefix: str
    input_suffix: str
    input_extra: list[ExtraChunk] = Field(default_factory=list)
    prompt: str = ""  # what follows the prefix: the start of the line being completed
    # -1: until the end of the context.
    n_predict: Annotated[int, Field(ge=-1, le=INT64_MAX), BeforeValidator(integral)] = -1
    temperature: float = Field(default=0.8, ge=0.0)
    top_k: NonNegativeInt = 40
    top_p: float = Field(default=0.95, gt=0.0, le=1.0)
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(default=1.0, gt=0.0)
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    seed: Seed = -1  # negative: random
    stop: list[NonEmpty] = Field(default_factory=list)
    stream: bool = False


class InfillChunk(BaseModel):
    """A streamed piece of the completion."""

    index: int = 0
    content: str
    tokens: list[int] = Field(default_factory=list)
    stop: bool = False
    id_slot: int = 0
    tokens_predicted: int = 0
    tokens_evaluated: int = 0


class InfillTimings(BaseModel):
    prompt_n: int
    prompt_ms: float
    prompt_per_token_ms: float
    prompt_per_second: float
    predicted_n: int
    predicted_ms: float
    predicted_per_token_ms: float
    predicted_per_second: float


class InfillResponse(InfillChunk):
    """The whole completion, or a stream's last event (its ``content`` then empty)."""

    stop: bool = True
    model: str
    prompt: str = ""
    has_new_line: bool
    truncated: bool = False
    stop_type: StopType
    stopping_word: str = ""
    tokens_cached: int = 0
    timings: InfillTimings
