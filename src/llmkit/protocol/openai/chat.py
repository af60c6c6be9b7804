"""/v1/chat/completions: messages, the request, the response and its stream chunks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmkit.protocol.openai.common import (
    RequestBody,
    SamplingFields,
    SparseModel,
    UsageInfo,
    now_seconds,
)


class ImageURL(BaseModel):
    url: str
    detail: str | None = None


class ContentPart(RequestBody):
    type: str
    text: str | None = None
    image_url: ImageURL | None = None


class ChatMessage(RequestBody):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class JsonSchemaFormat(BaseModel):
    # ``schema`` is a BaseModel attribute, so the field takes another name.
    model_config = ConfigDict(populate_by_name=True)

    name: str
    description: str | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """OpenAI's ``response_format``: plain text, any JSON object, or a JSON schema."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    # "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    response_format: ResponseFormat | None = None


class ChatTopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class ChatLogprob(ChatTopLogprob):
    top_logprobs: list[ChatTopLogprob] = Field(default_factory=list)


class ChatChoiceLogprobs(BaseModel):
    content: list[ChatLogprob] | None = None


class FunctionCall(BaseModel):
    name: str
    arguments: str


class ChatToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatResponseMessage(BaseModel):
    role: str = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ChatToolCall] | None = None


class ChatChoice(BaseModel):
    index: int
    message: ChatResponseMessage
    logprobs: ChatChoiceLogprobs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=now_seconds)
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo


class DeltaFunctionCall(SparseModel):
    _omit_unless_set = frozenset({"name"})

    name: str | None = None
    arguments: str = ""


class DeltaToolCall(SparseModel):
    """A call's first delta has ``id``, ``type`` and ``function.name``; later ones only
    ``index`` and an ``arguments`` fragment."""

    _omit_unless_set = frozenset({"id", "type"})

    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: DeltaFunctionCall


class DeltaMessage(SparseModel):
    _omit_unless_set = frozenset({"role", "content", "reasoning_content", "tool_calls"})

    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[DeltaToolCall] | None = None


class ChatStreamChoice(BaseModel):
    index: int
    delta: DeltaMessage
    logprobs: ChatChoiceLogprobs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class ChatCompletionChunk(SparseModel):
    _omit_unless_set = frozenset({"usage"})

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = Field(default_factory=now_seconds)
    model: str
    choices: list[ChatStreamChoice]
    usage: UsageInfo | None = None
