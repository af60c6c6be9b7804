"""Ollama's /api/* wire models."""

from llmkit.protocol.ollama.requests import (
    ChatRequest,
    EmbeddingsRequest,
    EmbedRequest,
    GenerateRequest,
    Message,
    ModelRequest,
)
from llmkit.protocol.ollama.responses import (
    ChatResponse,
    Details,
    EmbeddingsResponse,
    EmbedResponse,
    ErrorBody,
    GenerateResponse,
    ListedModel,
    ListResponse,
    PsResponse,
    RunningModel,
    ShowResponse,
    VersionResponse,
)

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "Details",
    "EmbedRequest",
    "EmbedResponse",
    "EmbeddingsRequest",
    "EmbeddingsResponse",
    "ErrorBody",
    "GenerateRequest",
    "GenerateResponse",
    "ListResponse",
    "ListedModel",
    "Message",
    "ModelRequest",
    "PsResponse",
    "RunningModel",
    "ShowResponse",
    "VersionResponse",
]
