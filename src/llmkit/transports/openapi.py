"""The HTTP app's OpenAPI document, generated from the pydantic models of protocol/openai.

Nothing here is written by hand but the list of routes: request and response schemas
come from the models (``models_json_schema``), and the bounds the server enforces on
lengths (``max_tokens`` up to the context length, ``logprobs`` up to ``max_logprobs``)
are added from the served model's limits, so a client or a fuzzer knows what is valid.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

import llmkit
from llmkit.protocol.openai import (
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionChunk,
    CompletionRequest,
    CompletionResponse,
    DetokenizeRequest,
    DetokenizeResponse,
    EmbeddingRequest,
    EmbeddingResponse,
    ErrorResponse,
    ModelList,
    TokenizeRequest,
    TokenizeResponse,
    VersionResponse,
)

_REF = "#/components/schemas/{model}"
_MODELS: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (CompletionRequest, "validation"),
    (ChatCompletionRequest, "validation"),
    (EmbeddingRequest, "validation"),
    (TokenizeRequest, "validation"),
    (DetokenizeRequest, "validation"),
    (CompletionResponse, "serialization"),
    (CompletionChunk, "serialization"),
    (ChatCompletionResponse, "serialization"),
    (ChatCompletionChunk, "serialization"),
    (EmbeddingResponse, "serialization"),
    (TokenizeResponse, "serialization"),
    (DetokenizeResponse, "serialization"),
    (ModelList, "serialization"),
    (VersionResponse, "serialization"),
    (ErrorResponse, "serialization"),
]
# What the errors of each kind of route mean.
_MODEL_ERRORS = {
    "400": "The request is invalid (the message names the parameter).",
    "401": "The API key is missing or wrong.",
    "404": "The model does not exist.",
    "429": "A per-key rate limit was reached; retry after Retry-After.",
    "503": "The server is overloaded (code `overloaded`, retry after Retry-After) or draining.",
}
_READ_ERRORS = {k: _MODEL_ERRORS[k] for k in ("401", "429")}


def openapi_document(
    model_names: list[str], max_model_len: int, max_logprobs: int
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``create_app``'s routes for the served model's names and
    limits (any other model name is a 404)."""
    refs, top = models_json_schema(_MODELS, ref_template=_REF)
    schemas: dict[str, Any] = top.get("$defs", {})
    for schema in schemas.values():
        if schema.get("title", "").endswith("Request") and "model" in schema["properties"]:
            schema["properties"]["model"] = {
                "anyOf": [{"enum": model_names}, {"type": "null"}],
                "default": None,
            }

    def ref(model: type[BaseModel], mode: JsonSchemaMode = "serialization") -> dict[str, Any]:
        return dict(refs[(model, mode)])

    for name in ("CompletionRequest", "ChatCompletionRequest"):
        props = schemas[name]["properties"]
        for field in ("max_tokens", "max_completion_tokens"):
            _bound(props, field, max_model_len)
        for field in ("logprobs", "top_logprobs", "prompt_logprobs"):
            _bound(props, field, max_logprobs)
    error = ref(ErrorResponse)

    def model_route(
        summary: str, request: type[BaseModel], response: type[BaseModel], chunk: Any = None
    ) -> dict[str, Any]:
        ok: dict[str, Any] = {"application/json": {"schema": ref(response)}}
        if chunk is not None:
            ok["text/event-stream"] = {"schema": {"type": "string"}}
        return {
            "post": {
                "summary": summary,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref(request, "validation")}},
                },
                "responses": {
                    "200": {"description": "The result, or its stream of events.", "content": ok},
                    **_errors(_MODEL_ERRORS, error),
                },
            }
        }

    def read_route(summary: str, content: dict[str, Any] | None) -> dict[str, Any]:
        ok: dict[str, Any] = {"description": "OK"}
        if content is not None:
            ok["content"] = content
        return {
            "get": {"summary": summary, "responses": {"200": ok, **_errors(_READ_ERRORS, error)}}
        }

    def probe(summary: str) -> dict[str, Any]:
        responses = {"200": {"description": "Yes."}, "503": {"description": "No."}}
        return {"get": {"summary": summary, "security": [], "responses": responses}}

    json_of = lambda schema: {"application/json": {"schema": schema}}  # noqa: E731
    load = {"type": "object", "properties": {"server_load": {"type": "integer"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "llmkit", "version": llmkit.__version__},
        "paths": {
            "/v1/completions": model_route(
                "Complete a prompt.", CompletionRequest, CompletionResponse, CompletionChunk
            ),
            "/v1/chat/completions": model_route(
                "Answer a conversation.",
                ChatCompletionRequest,
                ChatCompletionResponse,
                ChatCompletionChunk,
            ),
            "/v1/embeddings": model_route("Embed inputs.", EmbeddingRequest, EmbeddingResponse),
            "/tokenize": model_route("Tokenize a prompt.", TokenizeRequest, TokenizeResponse),
            "/detokenize": model_route(
                "Detokenize token ids.", DetokenizeRequest, DetokenizeResponse
            ),
            "/v1/models": read_route("The served model names.", json_of(ref(ModelList))),
            "/version": read_route("The server's version.", json_of(ref(VersionResponse))),
            "/metrics": read_route("Prometheus metrics.", {"text/plain": {"schema": {}}}),
            "/load": read_route("Requests in flight.", json_of(load)),
            "/openapi.json": {
                "get": {
                    "summary": "This document.",
                    "security": [],
                    "responses": {"200": {"description": "OK", "content": json_of({})}},
                }
            },
            "/health": probe("Ready (vLLM's name for /readyz)."),
            "/livez": probe("The process answers."),
            "/readyz": probe("The model is loaded, the engine healthy, the server not draining."),
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def _errors(kinds: dict[str, str], error: dict[str, Any]) -> dict[str, Any]:
    content = {"application/json": {"schema": error}}
    return {status: {"description": text, "content": content} for status, text in kinds.items()}


def _bound(properties: dict[str, Any], name: str, maximum: int) -> None:
    """Give the integer form of ``properties[name]`` an upper bound."""
    schema = properties.get(name)
    if schema is None:
        return
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "integer":
            option["maximum"] = maximum
