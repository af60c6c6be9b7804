"""llmkit: an embeddable LLM serving SDK.

Continuous batching over a paged KV cache, driven offline through :class:`LLM` or from
any anyio app through ``AsyncEngine``.
"""

from llmkit.config import EngineConfig
from llmkit.engine.async_engine import AsyncEngine, RequestStream
from llmkit.engine.core import EngineStats
from llmkit.engine.llm import LLM
from llmkit.errors import EngineDeadError, LLMKitError, RequestFailedError
from llmkit.outputs import (
    CompletionOutput,
    EmbeddingOutput,
    EmbeddingRequestOutput,
    Logprob,
    RequestOutput,
)
from llmkit.sampling_params import PoolingParams, RequestOutputKind, SamplingParams

__version__ = "0.1.0"

__all__ = [
    "LLM",
    "AsyncEngine",
    "EngineDeadError",
    "EngineStats",
    "LLMKitError",
    "RequestFailedError",
    "RequestStream",
    "CompletionOutput",
    "EmbeddingOutput",
    "EmbeddingRequestOutput",
    "EngineConfig",
    "Logprob",
    "PoolingParams",
    "RequestOutput",
    "RequestOutputKind",
    "SamplingParams",
    "__version__",
]
