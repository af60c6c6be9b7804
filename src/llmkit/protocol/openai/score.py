"""/score and /rerank (vLLM's, and the Jina/Cohere shape of /v1/rerank and /v2/rerank)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from llmkit.protocol.openai.common import (
    Int64,
    NonEmpty,
    PositiveInt,
    RequestBody,
    Some,
    Truncation,
    now_seconds,
)


class ScoreRequest(RequestBody):
    """``text_1`` against each ``text_2`` (one to many), or two lists pairwise."""

    model: str | None = None
    text_1: NonEmpty | Some[NonEmpty]
    text_2: NonEmpty | Some[NonEmpty]
    truncate_prompt_tokens: Truncation | None = None
    priority: Int64 = 0


class RerankRequest(RequestBody):
    model: str | None = None
    query: NonEmpty
    documents: Some[NonEmpty]
    top_n: PositiveInt | None = None
    return_documents: bool = True
    truncate_prompt_tokens: Truncation | None = None
    priority: Int64 = 0


class ScoreUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class ScoreData(BaseModel):
    index: int
    object: Literal["score"] = "score"
    score: float


class ScoreResponse(BaseModel):
    id: str
    object: Literal["list"] = "list"
    created: int = Field(default_factory=now_seconds)
    model: str
    data: list[ScoreData]
    usage: ScoreUsage


class RerankDocument(BaseModel):
    text: str


class RerankData(BaseModel):
    index: int
    document: RerankDocument | None = None
    relevance_score: float


class RerankUsage(BaseModel):
    total_tokens: int


class RerankResponse(BaseModel):
    id: str
    model: str
    usage: RerankUsage
    results: list[RerankData]
