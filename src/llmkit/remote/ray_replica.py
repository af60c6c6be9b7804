"""One engine replica as a Ray actor: an AsyncEngine whose outputs stream back to the group."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from llmkit.config import EngineConfig
from llmkit.engine.async_engine import AsyncEngine
from llmkit.engine.protocol import EngineOutput, ModelInfo, TokensPrompt
from llmkit.lora_request import LoRARequest
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats


class Replica:
    """Made a Ray actor by ``ray.remote(Replica)``; async, so its streams share one loop."""

    def __init__(self, config: EngineConfig):
        self.engine = AsyncEngine(config)
        self.engine.start()

    def info(self) -> ModelInfo:
        return self.engine.model_info

    def stats(self) -> EngineStats:
        return self.engine.stats()

    async def run(
        self,
        prompt: TokensPrompt,
        params: SamplingParams | PoolingParams,
        request_id: str,
        priority: int,
        lora_request: LoRARequest | None = None,
    ) -> AsyncIterator[EngineOutput]:
        """The request's outputs, as a Ray streaming generator."""
        stream: Any
        if isinstance(params, PoolingParams):
            stream = self.engine.encode(prompt, params, request_id=request_id, priority=priority)
        else:
            stream = self.engine.generate(
                prompt, params, request_id=request_id, priority=priority, lora_request=lora_request
            )
        try:
            async for out in stream:
                yield out
        finally:
            await stream.aclose()

    async def add_lora(self, lora_request: LoRARequest) -> None:
        await self.engine.add_lora(lora_request)

    async def remove_lora(self, lora_id: int) -> bool:
        return await self.engine.remove_lora(lora_id)

    async def reset_prefix_cache(self) -> bool:
        return await self.engine.reset_prefix_cache()

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    async def shutdown(self) -> None:
        await self.engine.shutdown()
