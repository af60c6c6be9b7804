"""llmkit: an embeddable LLM serving SDK.

Continuous batching over a paged KV cache, driven offline through :class:`LLM` or from
any anyio app through ``AsyncEngine``.
"""

from llmkit.config import EngineConfig
from llmkit.engine.llm import LLM
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
