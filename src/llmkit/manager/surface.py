"""The manager as an EngineProtocol: load and health summed over its loaded engines, and the
model calls served by its default model (the first named) once that one is loaded."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from llmkit.engine.protocol import (
    Conversation,
    EngineProtocol,
    ModelInfo,
    OutputStream,
    PromptType,
    TokensPrompt,
)
from llmkit.errors import EngineNotStartedError
from llmkit.lora_request import LoRARequest
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats

if TYPE_CHECKING:
    from llmkit.engine.core.tokenizer import Tokenizer


class EngineSurface(ABC):
    """What ModelManager adds to be an EngineProtocol; a request for a named model goes
    through ``acquire``, which loads it."""

    @abstractmethod
    def loaded_engines(self) -> Iterator[EngineProtocol]:
        """See ModelManager."""

    @abstractmethod
    def default_engine(self) -> EngineProtocol | None:
        """See ModelManager."""

    @abstractmethod
    def check_admission(self) -> None:
        """See ModelManager."""

    def _default(self) -> EngineProtocol:
        engine = self.default_engine()
        if engine is None:
            raise EngineNotStartedError(
                "the default model is not loaded; a request names its model and the manager "
                "loads it (ModelManager.acquire)"
            )
        return engine

    @property
    def model_info(self) -> ModelInfo:
        return self._default().model_info

    @property
    def tokenizer(self) -> Tokenizer:
        return self._default().tokenizer

    def tokenize(self, prompt: PromptType, truncate: int | None = None) -> TokensPrompt:
        return self._default().tokenize(prompt, truncate)

    def render_chat(self, messages: Conversation, *args: Any, **kwargs: Any) -> TokensPrompt:
        return self._default().render_chat(messages, *args, **kwargs)

    def generate(
        self, prompt: PromptType, sampling_params: SamplingParams | None = None, **kw: Any
    ) -> OutputStream[RequestOutput]:
        return self._default().generate(prompt, sampling_params, **kw)

    def encode(
        self, prompt: PromptType, pooling_params: PoolingParams | None = None, **kw: Any
    ) -> OutputStream[EmbeddingRequestOutput]:
        return self._default().encode(prompt, pooling_params, **kw)

    def chat(
        self, messages: Conversation, sampling_params: SamplingParams | None = None, **kw: Any
    ) -> OutputStream[RequestOutput]:
        return self._default().chat(messages, sampling_params, **kw)

    async def abort(self, request_id: str) -> None:
        for engine in list(self.loaded_engines()):
            await engine.abort(request_id)

    async def add_lora(self, lora_request: LoRARequest) -> None:
        raise ValueError("LoRA adapters belong to one model: give it in that model's settings")

    async def remove_lora(self, lora_id: int) -> bool:
        return False

    async def reset_prefix_cache(self) -> bool:
        done = [await engine.reset_prefix_cache() for engine in list(self.loaded_engines())]
        return all(done)

    async def compile_structured(self, params: SamplingParams, timeout_s: float) -> None:
        await self._default().compile_structured(params, timeout_s)

    @property
    def grammar_compiles(self) -> int:
        return sum(engine.grammar_compiles for engine in self.loaded_engines())

    def stats(self) -> EngineStats:
        """The loaded models' engines as one (``EngineStats.merge``)."""
        return EngineStats.merge([engine.stats() for engine in self.loaded_engines()])
