"""The score and rerank request schemas in the OpenAPI document, fitted to the served
model as openapi_requests fits the others: what the document calls valid, the server takes."""

from __future__ import annotations

from typing import Any

from llmkit.transports.openapi.requests import ServedModel, bound

_FITS = (
    "Each text's tokens must fit the context (max_model_len) unless truncate_prompt_tokens "
    "is set; a 400 (code context_length_exceeded) otherwise."
)


def fit_score_requests(schemas: dict[str, Any], model: ServedModel) -> None:
    """Tighten ScoreRequest and RerankRequest in ``schemas`` in place."""
    for name in ("ScoreRequest", "RerankRequest"):
        bound(schemas[name]["properties"], "truncate_prompt_tokens", model.max_model_len)
    schemas["RerankRequest"]["description"] = _FITS
    schemas["ScoreRequest"]["description"] = (
        "text_1 is one text (scored against each text_2), or a list as long as text_2 "
        "(scored pairwise). " + _FITS
    )
