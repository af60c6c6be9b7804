"""The score and rerank request schemas in the OpenAPI document, fitted to the served
model as openapi_requests fits the others: what the document calls valid, the server takes."""

from __future__ import annotations

from typing import Any

from llmkit.transports.openapi.requests import ServedModel

_FITS = (
    "Each text's tokens must fit the context (max_model_len) unless truncate_prompt_tokens "
    "is set; a 400 (code context_length_exceeded) otherwise."
)


def fit_score_requests(schemas: dict[str, Any], model: ServedModel) -> None:
    """Tighten ScoreRequest and RerankRequest in ``schemas`` in place."""
    text = {"type": "string", "minLength": 1}
    texts = {"type": "array", "items": text, "minItems": 1}
    truncate = {
        "anyOf": [
            {"type": "integer", "const": -1},
            {"type": "integer", "minimum": 1, "maximum": model.max_model_len},
            {"type": "null"},
        ],
        "default": None,
    }
    score = schemas["ScoreRequest"]
    score["properties"] |= {
        "text_1": {"anyOf": [text, texts]},
        "text_2": {"anyOf": [text, texts]},
        "truncate_prompt_tokens": truncate,
    }
    score["description"] = (
        "text_1 is one text (scored against each text_2), or a list as long as text_2 "
        "(scored pairwise). " + _FITS
    )
    rerank = schemas["RerankRequest"]
    rerank["properties"] |= {"query": text, "documents": texts, "truncate_prompt_tokens": truncate}
    rerank["description"] = _FITS
