"""Ollama's API: its endpoints, each declared once (transports/endpoints.py), and its errors."""

from __future__ import annotations

from llmkit.protocol.ollama import (
    ChatRequest,
    ChatResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EmbedRequest,
    EmbedResponse,
    ErrorBody,
    GenerateRequest,
    GenerateResponse,
    ListResponse,
    ModelRequest,
    PsResponse,
    ShowResponse,
    VersionResponse,
)
from llmkit.serving.errors import OpenAIError
from llmkit.transports.endpoints import Api, Endpoint

# What each status means on /api/*; the body is always {"error": "..."}.
_ERRORS = {
    400: "The request is invalid (the message names the field).",
    404: "No model of that name is served.",
    500: "The model failed to load (the message names it and why), or the engine failed.",
    403: "This server does not download, push, create, copy or delete models.",
    503: "The server is overloaded (retry after Retry-After) or shutting down.",
}
_MODEL_ERRORS = (400, 404, 500, 503)
_STORE = "Refused: this server serves the models it was started with."

_ENDPOINTS = (
    Endpoint("/api/chat", "POST", "chat", "Answer a conversation.", ChatRequest, ChatResponse,
             "ndjson", _MODEL_ERRORS, "generate"),
    Endpoint("/api/generate", "POST", "generate", "Complete a prompt.", GenerateRequest,
             GenerateResponse, "ndjson", _MODEL_ERRORS, "generate"),
    Endpoint("/api/embed", "POST", "embed", "Embed texts.", EmbedRequest, EmbedResponse,
             errors=_MODEL_ERRORS, task="embed"),
    Endpoint("/api/embeddings", "POST", "embeddings", "Embed one prompt (the older endpoint).",
             EmbeddingsRequest, EmbeddingsResponse, errors=_MODEL_ERRORS, task="embed"),
    Endpoint("/api/tags", "GET", "tags", "The served models.", response=ListResponse),
    Endpoint("/api/show", "POST", "show", "One model's details and capabilities.", ModelRequest,
             ShowResponse, errors=(400, 404, 500)),
    Endpoint("/api/ps", "GET", "ps", "The loaded models.", response=PsResponse),
    Endpoint("/api/version", "GET", "version", "The Ollama API version served.",
             response=VersionResponse),
    *(Endpoint(path, "POST", "unsupported", _STORE, errors=(403,), refuses=True)
      for path in ("/api/pull", "/api/push", "/api/create", "/api/copy")),
    Endpoint("/api/delete", "DELETE", "unsupported", _STORE, errors=(403,), refuses=True),
)  # fmt: skip


def ollama_error(exc: OpenAIError) -> ErrorBody:
    """An error as Ollama answers one: ``{"error": "..."}``."""
    return ErrorBody(error=exc.message)


OLLAMA = Api("ollama", _ENDPOINTS, _ERRORS, ErrorBody, ollama_error)
