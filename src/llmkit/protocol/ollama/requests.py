"""The bodies of Ollama's /api/chat, /api/generate, /api/embed, /api/embeddings and /api/show."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field

from llmkit.protocol.ollama.duration import PATTERN
from llmkit.protocol.openai.common import (
    Int64,
    Integer,
    JsonObject,
    NonEmpty,
    PositiveInt,
    RequestBody,
    Seed,
    Some,
)

# How long the model stays loaded after the request, in Go's duration syntax or seconds, as a
# string or a number: 0 unloads it, negative keeps it.
KeepAlive = Annotated[str, Field(pattern=PATTERN)] | float | None
# "json", or a JSON schema the answer must follow.
Format = Literal["", "json"] | JsonObject | None


class Options(RequestBody):
    """The options that reach sampling (under OpenAI's names and limits); the rest (the
    runner's: num_thread, mirostat, ...) are accepted and ignored, as Ollama ignores
    options a model does not use."""

    num_predict: Int64 | None = None  # 0 or negative: no limit
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: Int64 | None = None
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    seed: Seed | None = None
    stop: NonEmpty | list[NonEmpty] | None = None  # "" would stop at once, as in OpenAI's
    repeat_penalty: float | None = Field(default=None, gt=0.0)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    num_ctx: Int64 | None = None  # a model's context is its --max-model-len


class ToolCallFunction(RequestBody):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolCall(RequestBody):
    function: ToolCallFunction


class Message(RequestBody):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    thinking: str | None = None
    images: list[str] | None = None  # base64
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None


class ModelRequest(RequestBody):
    """/api/show (and the refused model-store routes): the model named."""

    # "name" in Ollama's older clients.
    model: str = Field(min_length=1, validation_alias=AliasChoices("model", "name"))
    verbose: bool = False


class _Generation(RequestBody):
    model: str = Field(min_length=1)
    stream: bool = True
    options: Options | None = None
    format: Format = None
    keep_alive: KeepAlive = None
    think: bool | Literal["low", "medium", "high"] | None = None


class ChatRequest(_Generation):
    messages: list[Message] = Field(default_factory=list)
    tools: list[JsonObject] | None = None


class GenerateRequest(_Generation):
    prompt: str | None = None
    suffix: str | None = None
    system: str | None = None
    template: str | None = None
    context: list[Integer] | None = None
    raw: bool = False
    images: list[str] | None = None


class EmbedRequest(RequestBody):
    model: str = Field(min_length=1)
    input: NonEmpty | Some[NonEmpty]
    truncate: bool = True
    options: Options | None = None
    keep_alive: KeepAlive = None
    dimensions: PositiveInt | None = None


class EmbeddingsRequest(RequestBody):
    """The older /api/embeddings: one prompt, one vector."""

    model: str = Field(min_length=1)
    prompt: NonEmpty
    options: Options | None = None
    keep_alive: KeepAlive = None
