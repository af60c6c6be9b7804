"""/v1/embeddings: the request and the response."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from llmkit.protocol.openai.common import Int64, PositiveInt, RequestBody, TextInput, Truncation


class EmbeddingRequest(RequestBody):
    model: str | None = None
    input: TextInput
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: PositiveInt | None = None
    user: str | None = None
    # vLLM's extras.
    truncate_prompt_tokens: Truncation | None = None
    normalize: bool | None = None
    priority: Int64 = 0


class EmbeddingData(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    # Floats, or base64 of their little-endian float32 bytes.
    embedding: list[float] | str


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: EmbeddingUsage
