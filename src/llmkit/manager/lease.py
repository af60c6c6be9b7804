"""A held model: its engine, counted as in flight until the lease and its streams end."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llmkit.engine.protocol import (
    Conversation,
    EngineProtocol,
    ModelInfo,
    Output_co,
    OutputStream,
    PromptType,
    TokensPrompt,
)
from llmkit.lora_request import LoRARequest
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats

if TYPE_CHECKING:
    from llmkit.engine.core.tokenizer import Tokenizer


class Lease:
    """``async with lease as engine`` (or ``release()``): the model stays loaded, and is
    never evicted, while the lease or any stream its engine opened is still open."""

    def __init__(self, engine: EngineProtocol, release: Callable[[], None], waited_s: float = 0.0):
        self._holds = 1
        self.waited_s = waited_s  # how long the request waited for its model to load
        self._release = release
        self._engine = engine

    @property
    def engine(self) -> EngineProtocol:
        """The engine, whose streams hold this lease. Made on each call: kept here, it would
        hold the lease that holds it, a reference cycle that would keep the engine (and its
        model's memory) alive after an unload until a garbage collection."""
        return HeldEngine(self._engine, self)

    def hold(self) -> None:
        self._holds += 1

    def release(self) -> None:
        """Drop one hold (the lease's own, or a stream's); the last one frees the model."""
        self._holds -= 1
        if self._holds == 0:
            self._release()

    async def __aenter__(self) -> EngineProtocol:
        return self.engine

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


class HeldStream(OutputStream[Output_co]):
    """A stream that holds its lease until it ends, is closed, or is dropped."""

    def __init__(self, inner: OutputStream[Output_co], lease: Lease):
        lease.hold()
        self._inner: OutputStream[Output_co] = inner
        self._done: Callable[[], object] = weakref.finalize(self, lease.release)

    @property
    def request_id(self) -> str:
        return self._inner.request_id

    def __aiter__(self) -> HeldStream[Output_co]:
        return self

    async def __anext__(self) -> Output_co:
        try:
            return await self._inner.__anext__()
        except BaseException:
            self._done()
            raise

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._done()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._done()


class HeldEngine(EngineProtocol):
    """The held model's engine; every stream it opens holds the lease."""

    def __init__(self, engine: EngineProtocol, lease: Lease):
        self._engine = engine
        self._lease = lease

    @property
    def model_info(self) -> ModelInfo:
        return self._engine.model_info

    @property
    def tokenizer(self) -> Tokenizer:
        return self._engine.tokenizer

    def tokenize(self, prompt: PromptType, truncate: int | None = None) -> TokensPrompt:
        return self._engine.tokenize(prompt, truncate)

    def render_chat(self, messages: Conversation, *args: Any, **kwargs: Any) -> TokensPrompt:
        return self._engine.render_chat(messages, *args, **kwargs)

    def generate(
        self, prompt: PromptType, sampling_params: SamplingParams | None = None, **kw: Any
    ) -> OutputStream[RequestOutput]:
        return HeldStream(self._engine.generate(prompt, sampling_params, **kw), self._lease)

    def encode(
        self, prompt: PromptType, pooling_params: PoolingParams | None = None, **kw: Any
    ) -> OutputStream[EmbeddingRequestOutput]:
        return HeldStream(self._engine.encode(prompt, pooling_params, **kw), self._lease)

    def chat(
        self, messages: Conversation, sampling_params: SamplingParams | None = None, **kw: Any
    ) -> OutputStream[RequestOutput]:
        return HeldStream(self._engine.chat(messages, sampling_params, **kw), self._lease)

    async def abort(self, request_id: str) -> None:
        await self._engine.abort(request_id)

    async def compile_structured(self, params: SamplingParams, timeout_s: float) -> None:
        await self._engine.compile_structured(params, timeout_s)

    @property
    def grammar_compiles(self) -> int:
        return self._engine.grammar_compiles

    async def add_lora(self, lora_request: LoRARequest) -> None:
        await self._engine.add_lora(lora_request)

    async def remove_lora(self, lora_id: int) -> bool:
        return await self._engine.remove_lora(lora_id)

    async def reset_prefix_cache(self) -> bool:
        return await self._engine.reset_prefix_cache()

    def stats(self) -> EngineStats:
        return self._engine.stats()

    def check_admission(self) -> None:
        self._engine.check_admission()

    def is_healthy(self) -> bool:
        return self._engine.is_healthy()

    async def __aenter__(self) -> HeldEngine:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """The manager, not a request, starts and stops the model's engine."""
