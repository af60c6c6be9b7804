"""A manager's named models as the endpoints see them: one held per request, listed with state."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from llmkit.engine.protocol import ModelInfo
from llmkit.errors import EngineOverloadedError
from llmkit.manager.errors import ModelLoadError
from llmkit.manager.lease import Lease
from llmkit.manager.slot import ModelStatus
from llmkit.protocol.openai import ManagedModelCard
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError, bad_request

if TYPE_CHECKING:
    from llmkit.engine.core.tokenizer import Tokenizer


def not_found(name: str) -> OpenAIError:
    return OpenAIError(404, f"The model `{name}` does not exist.", "model", "model_not_found")


async def hold_model(
    ctx: ServingContext, requested: str | None, keep_alive: str | float | None = None
) -> tuple[ServingContext, Lease | None]:
    """The context to serve one request with: for a manager, ``requested`` (default: the
    first model) loaded and held, which the caller releases; else ``ctx`` itself.

    A model that cannot load is a 500 naming it and why; too many requests waiting for a
    load, a 503 with a retry hint; a bad ``keep_alive``, a 400."""
    models = ctx.models
    if models is None:
        return ctx, None
    name = requested or ctx.model_name
    if name not in models.names:
        raise not_found(name)
    ctx.check_accepting()
    try:
        lease = await models.acquire(name, keep_alive)
    except ModelLoadError as exc:
        raise OpenAIError(500, str(exc), "model", "model_load_failed") from None
    except EngineOverloadedError as exc:
        raise ctx.engine_error(exc) from None
    except ValueError as exc:
        raise bad_request(str(exc), "keep_alive") from None
    return ctx.bound(lease.engine, name), lease


def card_fields(info: ModelInfo | None, tokenizer: Tokenizer | None = None) -> dict[str, Any]:
    """A model card's fields that a loaded engine (and its tokenizer) knows."""
    if info is None:
        return {}
    capabilities = ["embedding"] if info.task == "embed" else ["completion"]
    if tokenizer is not None and info.task != "embed" and not tokenizer.fim.missing:
        capabilities.append("insert")
    if info.supports_images:
        capabilities.append("vision")
    return {
        "capabilities": capabilities,
        "max_model_len": info.max_model_len,
        "input_modalities": ["text", "image"] if info.supports_images else ["text"],
        "architecture": info.architecture or None,
        "num_experts": info.num_experts or None,
        "num_experts_per_tok": info.experts_per_token or None,
        "sliding_window": info.sliding_window,
    }


def model_card(status: ModelStatus, ctx: ServingContext) -> ManagedModelCard:
    """One managed model with its state; ``expires_at`` in Unix seconds (None: never, or
    not loaded)."""
    assert ctx.models is not None
    engine = ctx.models.loaded_engine(status.name)
    info = engine.model_info if engine is not None else None
    expires = None if status.expires_in_s is None else time.time() + status.expires_in_s
    return ManagedModelCard(
        id=status.name,
        root=status.model,
        **card_fields(info, engine.tokenizer if engine is not None else None),
        state=status.state,
        expires_at=expires,
        resident_bytes=status.resident_bytes,
        pinned=status.pinned,
        error=status.error,
    )
