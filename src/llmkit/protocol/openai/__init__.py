"""Pydantic models of the OpenAI API as llmkit serves it: requests, responses, stream chunks."""

from __future__ import annotations

from llmkit.protocol.openai.chat import (
    ChatChoice,
    ChatChoiceLogprobs,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatLogprob,
    ChatMessage,
    ChatResponseMessage,
    ChatStreamChoice,
    ChatTopLogprob,
    ContentPart,
    DeltaMessage,
    JsonSchemaFormat,
    ResponseFormat,
)
from llmkit.protocol.openai.common import (
    ErrorInfo,
    ErrorResponse,
    SamplingFields,
    StreamOptions,
    UsageInfo,
)
from llmkit.protocol.openai.completions import (
    CompletionChoice,
    CompletionChunk,
    CompletionLogprobs,
    CompletionRequest,
    CompletionResponse,
    PromptInput,
)
from llmkit.protocol.openai.embeddings import (
    EmbeddingData,
    EmbeddingRequest,
    EmbeddingResponse,
    EmbeddingUsage,
)
from llmkit.protocol.openai.models import (
    DetokenizeRequest,
    DetokenizeResponse,
    ModelCard,
    ModelList,
    TokenizeRequest,
    TokenizeResponse,
    VersionResponse,
)

__all__ = [
    "ChatChoice",
    "ChatChoiceLogprobs",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "ChatCompletionResponse",
    "ChatLogprob",
    "ChatMessage",
    "ChatResponseMessage",
    "ChatStreamChoice",
    "ChatTopLogprob",
    "CompletionChoice",
    "CompletionChunk",
    "CompletionLogprobs",
    "CompletionRequest",
    "CompletionResponse",
    "ContentPart",
    "DeltaMessage",
    "DetokenizeRequest",
    "DetokenizeResponse",
    "EmbeddingData",
    "EmbeddingRequest",
    "EmbeddingResponse",
    "EmbeddingUsage",
    "ErrorInfo",
    "ErrorResponse",
    "JsonSchemaFormat",
    "ModelCard",
    "ModelList",
    "PromptInput",
    "ResponseFormat",
    "SamplingFields",
    "StreamOptions",
    "TokenizeRequest",
    "TokenizeResponse",
    "UsageInfo",
    "VersionResponse",
]
