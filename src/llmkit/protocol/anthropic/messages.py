"""POST /v1/messages and /v1/messages/count_tokens: requests, responses, stream events."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from llmkit.protocol.openai.common import (
    JsonObject,
    NonEmpty,
    NonNegativeInt,
    PositiveInt,
    RequestBody,
)


class TextBlock(RequestBody):
    type: Literal["text"]
    text: str


class ImageSource(RequestBody):
    type: Literal["base64", "url"]
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class ImageBlock(RequestBody):
    type: Literal["image"]
    source: ImageSource


class ToolUseBlock(RequestBody):
    """A call the assistant made, sent back in the conversation."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: JsonObject


class ToolResultBlock(RequestBody):
    """What a tool answered, in a user message."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock] | None = None
    is_error: bool | None = None


class ThinkingBlock(RequestBody):
    """An assistant's reasoning sent back (interleaved thinking); the signature is kept
    only for clients that send it, as the reasoning is the model's own text."""

    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


ContentBlock = Annotated[
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock,
    Field(discriminator="type"),
]


class AnthropicMessage(RequestBody):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


class AnthropicTool(RequestBody):
    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: JsonObject


class ToolChoice(RequestBody):
    type: Literal["auto", "any", "tool", "none"]
    name: NonEmpty | None = None
    disable_parallel_tool_use: bool | None = None


class CountTokensRequest(RequestBody):
    """What the prompt is made of: the conversation, its system text and its tools."""

    model: str | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[AnthropicTool] | None = None
    tool_choice: ToolChoice | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: PositiveInt
    stop_sequences: list[NonEmpty] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: NonNegativeInt | None = None
    metadata: JsonObject | None = None
    # {"type": "enabled", "budget_tokens": N} or {"type": "disabled"}: the reasoning parser
    # decides what is thinking, so it is taken and not acted on.
    thinking: JsonObject | None = None


class ResponseText(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ResponseThinking(BaseModel):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class ResponseToolUse(BaseModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class MessagesUsage(BaseModel):
    input_tokens: int
    output_tokens: int


class MessagesResponse(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ResponseThinking | ResponseText | ResponseToolUse]
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None
    usage: MessagesUsage


class CountTokensResponse(BaseModel):
    input_tokens: int


class MessageStart(BaseModel):
    type: Literal["message_start"] = "message_start"
    message: MessagesResponse


class ContentBlockStart(BaseModel):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: ResponseThinking | ResponseText | ResponseToolUse


class TextDelta(BaseModel):
    type: Literal["text_delta"] = "text_delta"
    text: str


class ThinkingDelta(BaseModel):
    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str


class InputJsonDelta(BaseModel):
    """A piece of a tool_use block's input, as JSON text."""

    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ContentBlockDelta(BaseModel):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: ThinkingDelta | TextDelta | InputJsonDelta


class ContentBlockStop(BaseModel):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class MessageDelta(BaseModel):
    stop_reason: StopReason | None
    stop_sequence: str | None = None


class MessageDeltaEvent(BaseModel):
    type: Literal["message_delta"] = "message_delta"
    delta: MessageDelta
    usage: MessagesUsage


class MessageStop(BaseModel):
    type: Literal["message_stop"] = "message_stop"


class Ping(BaseModel):
    type: Literal["ping"] = "ping"


class AnthropicError(BaseModel):
    type: str
    message: str


class AnthropicErrorResponse(BaseModel):
    type: Literal["error"] = "error"
    error: AnthropicError
