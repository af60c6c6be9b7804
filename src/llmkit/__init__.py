"""llmkit: an embeddable LLM serving SDK.

Continuous batching over a paged KV cache, driven offline through :class:`LLM` or from
any anyio app through :class:`AsyncEngine`. Names are imported on first use, so that
``import llmkit.engine.sched.scheduler`` (pure Python) does not pull in torch. The adapters
around an engine have their own short modules: :mod:`llmkit.http` (``create_app``),
:mod:`llmkit.unix` (``serve_unix``, ``EngineClient``), :mod:`llmkit.replicas`
(``ReplicaGroup``) and :mod:`llmkit.websocket` (``WebSocketClient``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AsyncEngine": "llmkit.engine.async_engine",
    "RequestStream": "llmkit.engine.request_stream",
    "EngineStats": "llmkit.types",
    "EngineNotStartedError": "llmkit.errors",
    "EngineProtocol": "llmkit.engine.protocol",
    "ModelInfo": "llmkit.engine.protocol",
    "LLM": "llmkit.engine.llm",
    "EngineConfig": "llmkit.config",
    "EngineDeadError": "llmkit.errors",
    "EngineOverloadedError": "llmkit.errors",
    "LLMKitError": "llmkit.errors",
    "LoRARequest": "llmkit.lora_request",
    "ParamError": "llmkit.errors",
    "RequestFailedError": "llmkit.errors",
    "BeamSearchParams": "llmkit.engine.beam_search",
    "CompletionOutput": "llmkit.outputs",
    "EmbeddingOutput": "llmkit.outputs",
    "EmbeddingRequestOutput": "llmkit.outputs",
    "Logprob": "llmkit.outputs",
    "RequestOutput": "llmkit.outputs",
    "PoolingParams": "llmkit.sampling_params",
    "RequestOutputKind": "llmkit.sampling_params",
    "SamplingParams": "llmkit.sampling_params",
    "StructuredOutputsParams": "llmkit.sampling_params",
    "create_engine": "llmkit.remote.placement",
    "default_model": "llmkit.model.names",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from llmkit.config import EngineConfig
    from llmkit.engine.async_engine import AsyncEngine
    from llmkit.engine.beam_search import BeamSearchParams
    from llmkit.engine.llm import LLM
    from llmkit.engine.protocol import EngineProtocol, ModelInfo
    from llmkit.engine.request_stream import RequestStream
    from llmkit.errors import (
        EngineDeadError,
        EngineNotStartedError,
        EngineOverloadedError,
        LLMKitError,
        ParamError,
        RequestFailedError,
    )
    from llmkit.lora_request import LoRARequest
    from llmkit.model.names import default_model
    from llmkit.outputs import (
        CompletionOutput,
        EmbeddingOutput,
        EmbeddingRequestOutput,
        Logprob,
        RequestOutput,
    )
    from llmkit.remote.placement import create_engine
    from llmkit.sampling_params import (
        PoolingParams,
        RequestOutputKind,
        SamplingParams,
        StructuredOutputsParams,
    )
    from llmkit.types import EngineStats
