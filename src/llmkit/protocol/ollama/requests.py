"""The bodies of Ollama's /api/chat, /api/generate, /api/embed, /api/embeddings and /api/show."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field

from llmkit.protocol.openai.common import JsonObject, RequestBody

# A duration ("5m", "1h30m"), or seconds; 0 unloads after the request, negative keeps it.
KeepAlive = str | float | None
# "json", or a JSON schema the answer must follow.
Format = Literal["", "json"] | JsonObject | None


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
    options: dict[str, Any] | None = None
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
    context: list[int] | None = None
    raw: bool = False
    images: list[str] | None = None


class EmbedRequest(RequestBody):
    model: str = Field(min_length=1)
    input: str | list[str]
    truncate: bool = True
    options: dict[str, Any] | None = None
    keep_alive: KeepAlive = None
    dimensions: int | None = Field(default=None, ge=1)


class EmbeddingsRequest(RequestBody):
    """The older /api/embeddings: one prompt, one vector."""

    model: str = Field(min_length=1)
    prompt: str
    options: dict[str, Any] | None = None
    keep_alive: KeepAlive = None
