"""The HTTP app's OpenAPI document, generated from the pydantic models of protocol/openai.

Nothing here is written by hand but the list of routes and what each answers: request and
response schemas come from the models (``models_json_schema``), fitted to the served model
(openapi_requests), and the document lists the routes this app serves (embeddings only for
an embedding model, generation only for a generating one), the statuses each can answer,
and API keys only where the server asks for them, so that a client or a fuzzer holding the
server to its document finds the two agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

import llmkit
from llmkit.protocol.anthropic import (
    AnthropicErrorResponse,
    CountTokensRequest,
    CountTokensResponse,
    MessagesRequest,
    MessagesResponse,
)
from llmkit.protocol.ollama import ErrorBody
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
    LoadLoRAAdapterRequest,
    ModelCard,
    ModelList,
    RerankRequest,
    RerankResponse,
    ScoreRequest,
    ScoreResponse,
    TokenizeRequest,
    TokenizeResponse,
    UnloadLoRAAdapterRequest,
    VersionResponse,
)
from llmkit.protocol.openai.responses import (
    DeletedResponse,
    ResponseEvent,
    ResponseObject,
    ResponsesRequest,
)
from llmkit.serving.context import ServingContext
from llmkit.transports.endpoints import operations, schema_models
from llmkit.transports.ollama.endpoints import OLLAMA_ENDPOINTS, OLLAMA_ERRORS
from llmkit.transports.openapi_fit import fit_schemas

_REF = "#/components/schemas/{model}"
_MODELS: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (CompletionRequest, "validation"),
    (ChatCompletionRequest, "validation"),
    (EmbeddingRequest, "validation"),
    (TokenizeRequest, "validation"),
    (DetokenizeRequest, "validation"),
    (LoadLoRAAdapterRequest, "validation"),
    (UnloadLoRAAdapterRequest, "validation"),
    (CompletionResponse, "serialization"),
    (CompletionChunk, "serialization"),
    (ChatCompletionResponse, "serialization"),
    (ChatCompletionChunk, "serialization"),
    (EmbeddingResponse, "serialization"),
    (TokenizeResponse, "serialization"),
    (DetokenizeResponse, "serialization"),
    (ModelList, "serialization"),
    (ModelCard, "serialization"),
    (VersionResponse, "serialization"),
    (ErrorResponse, "serialization"),
    (ScoreRequest, "validation"),
    (RerankRequest, "validation"),
    (ScoreResponse, "serialization"),
    (RerankResponse, "serialization"),
    (ResponsesRequest, "validation"),
    (ResponseObject, "serialization"),
    (DeletedResponse, "serialization"),
    (MessagesRequest, "validation"),
    (CountTokensRequest, "validation"),
    (MessagesResponse, "serialization"),
    (CountTokensResponse, "serialization"),
    (AnthropicErrorResponse, "serialization"),
    (ErrorBody, "serialization"),
    *schema_models(OLLAMA_ENDPOINTS),
]
# The errors a route can answer, and what each means.
_ERRORS = {
    "400": "The request is invalid (the message names the parameter).",
    "401": "The API key is missing or wrong.",
    "404": "The model does not exist.",
    "408": "The request body did not arrive in time.",
    "413": "The request body is larger than the server takes.",
    "429": "A per-key rate limit was reached; retry after Retry-After.",
    "503": "The server is overloaded (code `overloaded`, retry after Retry-After) or draining.",
}
_POST_ERRORS = ("400", "404", "408", "413", "429", "503")
_GET_ERRORS = ("429",)


def openapi_document(
    names: list[str], ctx: ServingContext, open_paths: frozenset[str] | None
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``create_app``'s routes for the served model's names
    (any other name is a 404) and limits; ``open_paths``: the paths that need no API key
    (None: the server takes no keys)."""
    # Several models: no one model's limits fit every request, and every route is served.
    info = None if ctx.models is not None else ctx.engine.model_info
    refs, top = models_json_schema(_MODELS, ref_template=_REF)
    schemas: dict[str, Any] = top.get("$defs", {})
    for schema in schemas.values():
        if schema.get("title", "").endswith("Request") and "model" in schema["properties"]:
            # Ollama's requests must name their model; OpenAI's default to the first.
            if "model" in schema.get("required", ()):
                schema["properties"]["model"] = {"enum": names}
            else:
                schema["properties"]["model"] = {
                    "anyOf": [{"enum": names}, {"type": "null"}],
                    "default": None,
                }
    if info is not None:
        fit_schemas(schemas, ctx, info)

    def ref(model: type[BaseModel], mode: JsonSchemaMode = "serialization") -> dict[str, Any]:
        return dict(refs[(model, mode)])

    error = {"application/json": {"schema": ref(ErrorResponse)}}

    def errors(codes: tuple[str, ...], path: str) -> dict[str, Any]:
        if open_paths is not None and path not in open_paths:
            codes = ("401", *codes)
        return {c: {"description": _ERRORS[c], "content": error} for c in sorted(codes)}

    def post(
        path: str, summary: str, request: type[BaseModel], ok: dict[str, Any]
    ) -> dict[str, Any]:
        body = {"application/json": {"schema": ref(request, "validation")}}
        return {
            "post": {
                "summary": summary,
                "requestBody": {"required": True, "content": body},
                "responses": {"200": ok, **errors(_POST_ERRORS, path)},
            }
        }

    def model_route(path: str, summary: str, request: type[BaseModel], response: Any) -> Any:
        content = {"application/json": {"schema": ref(response)}}
        return post(path, summary, request, {"description": "The result.", "content": content})

    def streaming_route(
        path: str, summary: str, request: type[BaseModel], response: Any, chunk: Any
    ) -> Any:
        content = {
            "application/json": {"schema": ref(response)},
            # Each event: `data: <chunk JSON>` (or an error's), and last `data: [DONE]`.
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "data": {
                            "type": "string",
                            "description": f"A {chunk.__name__} as JSON, or [DONE] at the end.",
                        }
                    },
                    "required": ["data"],
                }
            },
        }
        ok = {"description": "The result, or with stream: true its events.", "content": content}
        return post(path, summary, request, ok)

    def get(path: str, summary: str, content: dict[str, Any] | None) -> dict[str, Any]:
        ok: dict[str, Any] = {"description": "OK"}
        if content is not None:
            ok["content"] = content
        operation = {"summary": summary, "responses": {"200": ok, **errors(_GET_ERRORS, path)}}
        return {"get": operation}

    def probe(summary: str) -> dict[str, Any]:
        responses = {"200": {"description": "Yes."}, "503": {"description": "No."}}
        return {"get": {"summary": summary, "responses": responses}}

    json_of: Callable[[Any], dict[str, Any]] = lambda s: {"application/json": {"schema": s}}  # noqa: E731
    text = {"text/plain": {"schema": {"type": "string"}}}
    load = {"type": "object", "properties": {"server_load": {"type": "integer"}}}
    paths: dict[str, Any] = {}
    if info is None or info.supports_generate:
        paths["/v1/completions"] = streaming_route(
            "/v1/completions",
            "Complete a prompt.",
            CompletionRequest,
            CompletionResponse,
            CompletionChunk,
        )
        paths["/v1/chat/completions"] = streaming_route(
            "/v1/chat/completions",
            "Answer a conversation.",
            ChatCompletionRequest,
            ChatCompletionResponse,
            ChatCompletionChunk,
        )
        paths["/v1/responses"] = streaming_route(
            "/v1/responses",
            "Respond to input items (the Responses API).",
            ResponsesRequest,
            ResponseObject,
            ResponseEvent,
        )
        not_found = {"description": "No stored response has this id.", "content": error}
        stored = get("/v1/responses/{id}", "A stored response.", json_of(ref(ResponseObject)))
        deleted = json_of(ref(DeletedResponse))
        stored["delete"] = get("/v1/responses/{id}", "Delete a stored response.", deleted)["get"]
        cancel: dict[str, Any] = {"summary": "Cancel a background response (none run here)."}
        cancel["responses"] = errors(("400", "429"), "/v1/responses/{id}/cancel")
        for path, route in (("", stored), ("/cancel", {"post": cancel})):
            paths["/v1/responses/{response_id}" + path] = _with_id(route, "response_id", not_found)
        paths["/v1/messages"] = streaming_route(
            "/v1/messages",
            "Answer a conversation (Anthropic's Messages API).",
            MessagesRequest,
            MessagesResponse,
            MessagesResponse,
        )
        paths["/v1/messages/count_tokens"] = model_route(
            "/v1/messages/count_tokens",
            "Count a conversation's tokens (Anthropic's Messages API).",
            CountTokensRequest,
            CountTokensResponse,
        )
        # The endpoint's own errors are Anthropic's; the server's (keys, limits) OpenAI's.
        anthropic_error = {"application/json": {"schema": ref(AnthropicErrorResponse)}}
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            for code in ("400", "404", "503"):
                paths[path]["post"]["responses"][code]["content"] = anthropic_error
        stream = paths["/v1/messages"]["post"]["responses"]["200"]["content"]
        stream["text/event-stream"]["schema"]["properties"]["data"]["description"] = (
            "Each event's JSON after its `event: <type>` line: message_start, ping, "
            "content_block_start/_delta/_stop, message_delta, message_stop (or error)."
        )
    if info is None or info.supports_embed:
        paths["/v1/embeddings"] = model_route(
            "/v1/embeddings", "Embed inputs.", EmbeddingRequest, EmbeddingResponse
        )
        for path in ("/score", "/v1/score"):
            paths[path] = model_route(
                path, "Score text pairs (cosine of embeddings).", ScoreRequest, ScoreResponse
            )
        for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
            paths[path] = model_route(
                path, "Rank documents against a query.", RerankRequest, RerankResponse
            )
    paths["/tokenize"] = model_route(
        "/tokenize", "Tokenize a prompt or messages.", TokenizeRequest, TokenizeResponse
    )
    paths["/detokenize"] = model_route(
        "/detokenize", "Detokenize token ids.", DetokenizeRequest, DetokenizeResponse
    )
    if ctx.loras.runtime_updates:
        for path, summary, request in (
            ("/v1/load_lora_adapter", "Load a LoRA adapter.", LoadLoRAAdapterRequest),
            ("/v1/unload_lora_adapter", "Unload a LoRA adapter.", UnloadLoRAAdapterRequest),
        ):
            paths[path] = post(path, summary, request, {"description": "Done.", "content": text})
    paths |= {
        "/v1/models": get("/v1/models", "The served model names.", json_of(ref(ModelList))),
        "/v1/models/{model}": _with_id(
            get("/v1/models/{model}", "One served model.", json_of(ref(ModelCard))),
            "model",
            {"description": _ERRORS["404"], "content": error},
        ),
        "/version": get("/version", "The server's version.", json_of(ref(VersionResponse))),
        "/metrics": get("/metrics", "Prometheus metrics.", text),
        "/load": get("/load", "Requests in flight.", json_of(load)),
        "/openapi.json": {
            "get": {
                "summary": "This document.",
                "responses": {"200": {"description": "OK", "content": json_of({})}},
            }
        },
        **operations(
            [e for e in OLLAMA_ENDPOINTS if info is None or e.task in (None, info.task)],
            ref,
            OLLAMA_ERRORS,
            ref(ErrorBody),
            # The key check answers before any route, in OpenAI's shape.
            {"description": _ERRORS["401"], "content": error} if open_paths is not None else None,
        ),
        "/health": probe("Ready (vLLM's name for /readyz)."),
        "/livez": probe("The process answers."),
        "/readyz": probe("The model is loaded, the engine healthy, the server not draining."),
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "llmkit", "version": llmkit.__version__},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if open_paths is not None:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
        for path in open_paths & paths.keys():
            for operation in paths[path].values():
                operation["security"] = []
    return document


def _with_id(route: dict[str, Any], name: str, not_found: dict[str, Any]) -> dict[str, Any]:
    """``route`` with the path parameter ``name`` and the 404 of an id that is not there."""
    for operation in route.values():
        operation["parameters"] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        ]
        operation["responses"]["404"] = not_found
    return route
