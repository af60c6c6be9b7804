"""The answers of Ollama's /api/*: generation chunks with their timings, models, versions."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from llmkit.protocol.ollama.requests import ToolCall


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class Timings(BaseModel):
    """A final chunk's counts and durations (nanoseconds), as Ollama reports them."""

    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None


class AnswerMessage(BaseModel):
    role: str = "assistant"
    content: str = ""
    thinking: str | None = None
    tool_calls: list[ToolCall] | None = None


class ChatResponse(Timings):
    model: str
    created_at: str = Field(default_factory=now_iso)
    message: AnswerMessage
    done: bool


class GenerateResponse(Timings):
    model: str
    created_at: str = Field(default_factory=now_iso)
    response: str
    thinking: str | None = None
    done: bool


class EmbedResponse(BaseModel):
    model: str
    embeddings: list[list[float]]
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None


class EmbeddingsResponse(BaseModel):
    embedding: list[float]


class Details(BaseModel):
    parent_model: str = ""
    format: str  # "gguf" or "safetensors"
    family: str
    families: list[str]
    parameter_size: str
    quantization_level: str


class ListedModel(BaseModel):
    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: Details


class ListResponse(BaseModel):
    models: list[ListedModel]


class RunningModel(ListedModel):
    expires_at: str
    size_vram: int = 0
    context_length: int | None = None


class PsResponse(BaseModel):
    models: list[RunningModel]


class ShowResponse(BaseModel):
    modelfile: str
    parameters: str
    template: str
    details: Details
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str


class VersionResponse(BaseModel):
    version: str


class ErrorBody(BaseModel):
    """Every Ollama error: ``{"error": "..."}``."""

    error: str
