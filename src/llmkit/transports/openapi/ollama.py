"""Ollama's request schemas in the OpenAPI document, fitted to the served model as
openapi_requests fits OpenAI's: what the document calls valid, the server accepts."""

from __future__ import annotations

from typing import Any

from llmkit.transports.openapi.requests import ServedModel, bound, tools_schema

# num_predict has no bound of its own: without messages (or a prompt) a request only loads
# the model, whatever it asks.
_RULES = (
    "The prompt's tokens plus a positive options.num_predict (max_tokens) must fit the "
    "context (max_model_len); the chat template must render the messages. A 400 otherwise."
)


def fit_ollama_requests(schemas: dict[str, Any], model: ServedModel) -> None:
    """Tighten /api/chat's, /api/generate's and /api/embed's bodies in ``schemas`` in place."""
    if not model.supports_images:  # base64 images, on a text-only model
        for name in ("Message", "GenerateRequest"):
            schemas[name]["properties"].pop("images", None)
    for name in ("ChatRequest", "GenerateRequest"):
        schemas[name]["description"] = _RULES
    bound(schemas["EmbedRequest"]["properties"], "dimensions", model.hidden_size)
    # The tools reach the chat template as a chat request's do, checked alike.
    schemas["ChatRequest"]["properties"]["tools"] = tools_schema()
    if not model.can_insert:
        # A suffix asks for the middle, which only a model with FIM tokens fills ("" is none).
        schemas["GenerateRequest"]["properties"]["suffix"] = {
            "anyOf": [{"type": "string", "maxLength": 0}, {"type": "null"}],
            "default": None,
        }
