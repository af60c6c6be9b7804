"""llama-server's /infill: the text around the cursor, other files of the repository, and the
completion in its /completion shape (llama.vim and llama.vscode send and read these)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from llmkit.protocol.openai.common import RequestBody

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
    n_predict: int = Field(default=-1, ge=-1)  # -1: until the end of the context
    temperature: float = Field(default=0.8, ge=0.0)
    top_k: int = Field(default=40, ge=0)
    top_p: float = Field(default=0.95, gt=0.0, le=1.0)
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(default=1.0, gt=0.0)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int = -1  # -1: random
    stop: list[str] = Field(default_factory=list)
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
