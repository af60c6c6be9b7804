"""The request schemas of /openapi.json tightened to the one served model's limits."""

from __future__ import annotations

from typing import Any

from llmkit.engine.protocol import ModelInfo
from llmkit.serving.context import ServingContext
from llmkit.transports.openapi.anthropic import fit_anthropic_requests
from llmkit.transports.openapi.ollama import fit_ollama_requests
from llmkit.transports.openapi.requests import ServedModel, fit_requests
from llmkit.transports.openapi.responses import fit_responses_request
from llmkit.transports.openapi.score import fit_score_requests


def fit_schemas(schemas: dict[str, Any], ctx: ServingContext, info: ModelInfo) -> None:
    """Tighten the request schemas to the one served model's limits."""
    served = ServedModel(
        max_model_len=info.max_model_len,
        max_logprobs=info.max_logprobs,
        vocab_size=info.vocab_size,
        hidden_size=info.hidden_size,
        supports_images=info.supports_images,
        can_insert=not ctx.engine.tokenizer.fim.missing,
        has_chat_template=bool(ctx.chat_template or ctx.engine.tokenizer.chat_template),
        auto_tool_choice=ctx.options.enable_auto_tool_choice,
    )
    fit_requests(schemas, served)
    fit_anthropic_requests(schemas, served)
    fit_score_requests(schemas, served)
    fit_responses_request(schemas, served)
    fit_ollama_requests(schemas, served)
