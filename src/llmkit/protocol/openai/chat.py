"""/v1/chat/completions: messages, the request, the response and its stream chunks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from llmkit.protocol.openai.common import (
    ChoicesResponse,
    JsonObject,
    NonNegativeInt,
    PositiveInt,
    RequestBody,
    SamplingFields,
    SparseModel,
    UsageInfo,
    WireModel,
    now_seconds,
)

# apply_chat_template's own arguments and the names it renders the template with: the
# request sets them, so chat_template_kwargs may not (a duplicate is a TypeError there).
RESERVED_TEMPLATE_KWARGS = frozenset(
    {
        "conversation",
        "messages",
        "tools",
        "documents",
        "chat_template",
        "add_generation_prompt",
        "continue_final_message",
        "tokenize",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
    }
)


def _no_reserved(kwargs: dict[str, Any]) -> dict[str, Any]:
    taken = sorted(RESERVED_TEMPLATE_KWARGS & kwargs.keys())
    if taken:
        raise ValueError(f"may not set {', '.join(taken)}: the request sets them")
    return kwargs


TemplateKwargs = Annotated[JsonObject, AfterValidator(_no_reserved)]
# A request's own template: an installed one's name (never holding a brace) or Jinja text
# (always holding one), so never empty.
ChatTemplate = Annotated[
    str,
    Field(
        min_length=1,
        description="An installed chat template's name, or a Jinja template that renders "
        "the messages.",
    ),
]


class ImageURL(WireModel):
    url: str
    detail: str | None = None


class ContentPart(RequestBody):
    type: str
    text: str | None = None
    image_url: ImageURL | None = None


class ToolCallFunction(RequestBody):
    name: str
    # JSON text, as the model wrote it.
    arguments: str


class MessageToolCall(RequestBody):
    """A call an assistant message made, as OpenAI's API takes it back in ``messages``."""

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ChatMessage(RequestBody):
    """A message; only an assistant message that calls tools may leave out ``content``, as
    OpenAI requires."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    # An assistant's reasoning sent back (interleaved thinking), under either name.
    reasoning: str | None = None
    reasoning_content: str | None = None

    @model_validator(mode="after")
    def _has_content(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise PydanticCustomError(
                "content_required",
                "content is required in a {role} message (only an assistant message with "
                "tool_calls may leave it out)",
                {"role": self.role},
            )
        return self


class JsonSchemaFormat(WireModel):
    # ``schema`` is a BaseModel attribute, so the field takes another name.
    model_config = ConfigDict(populate_by_name=True)

    name: str
    description: str | None = None
    json_schema: JsonObject | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(WireModel):
    """OpenAI's ``response_format``: plain text, any JSON object, or a JSON schema."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    logprobs: bool = False
    top_logprobs: NonNegativeInt | None = None
    tools: list[JsonObject] | None = None
    # "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.
    tool_choice: str | JsonObject | None = None
    parallel_tool_calls: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template: ChatTemplate | None = None
    chat_template_kwargs: TemplateKwargs | None = None
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
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ChatToolCall] | None = None


class ChatChoice(BaseModel):
    index: int
    message: ChatResponseMessage
    logprobs: ChatChoiceLogprobs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class ChatCompletionResponse(ChoicesResponse[ChatChoice]):
    object: Literal["chat.completion"] = "chat.completion"


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
    _omit_unless_set = frozenset(
        {"role", "content", "reasoning", "reasoning_content", "tool_calls"}
    )

    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
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
