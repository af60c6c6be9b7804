"""EngineFrontend: the caller's half of every engine, written once.

Tokenizing, rendering chats and starting requests happen on the caller's side of the
engine protocol, the same for an engine in this process, one behind a unix socket and a
group of Ray replicas; each of those says only how a checked request starts
(``_start``), where its input processor is (``_inputs``) and when it refuses work.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import anyio

from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.output_stream import EngineStream
from llmkit.engine.processor import InputProcessor
from llmkit.engine.protocol import Conversation, ModelInfo, PromptType, TokensPrompt
from llmkit.lora_request import LoRARequest
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, SamplingParams


class EngineFrontend(ABC):
    """tokenize, render_chat, generate, encode and chat of
    :class:`~llmkit.engine.protocol.EngineProtocol` over one abstract ``_start``."""

    @abstractmethod
    def _inputs(self) -> InputProcessor:
        """The input processor of the served model (raise if the engine is not reachable)."""

    @abstractmethod
    def _start(
        self,
        prompt: PromptType,
        params: SamplingParams | PoolingParams,
        request_id: str | None,
        priority: int,
        lora: LoRARequest | None,
    ) -> EngineStream[Any]:
        """Check, admit and start one request; ``ValueError`` for bad input."""

    @abstractmethod
    def check_admission(self) -> None:
        """Raise ``EngineOverloadedError`` if a new request would be refused now."""

    @property
    def model_info(self) -> ModelInfo:
        return self._inputs().info

    @property
    def tokenizer(self) -> Tokenizer:
        return self._inputs().tokenizer

    def tokenize(self, prompt: PromptType, truncate: int | None = None) -> TokensPrompt:
        """Checked token ids of ``prompt``; ``truncate`` keeps the last ones (-1: max_model_len)."""
        return self._inputs().tokenize(prompt, truncate)

    def render_chat(
        self,
        messages: Conversation,
        chat_template: str | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict[str, Any]] | None = None,
    ) -> TokensPrompt:
        """A conversation rendered through the chat template and tokenized."""
        return self._inputs().render_chat(
            messages,
            chat_template,
            chat_template_kwargs,
            add_generation_prompt,
            continue_final_message,
            tools,
        )

    def generate(
        self,
        prompt: PromptType,
        sampling_params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        priority: int = 0,
        lora_request: LoRARequest | None = None,
    ) -> EngineStream[RequestOutput]:
        """Start a request (with a LoRA adapter if ``lora_request`` names one); iterate the
        result with ``async for``. Invalid input raises ``ValueError`` before anything is queued.
        """
        params = sampling_params or SamplingParams()
        return self._start(prompt, params, request_id, priority, lora_request)

    def encode(
        self,
        prompt: PromptType,
        pooling_params: PoolingParams | None = None,
        *,
        request_id: str | None = None,
        priority: int = 0,
    ) -> EngineStream[EmbeddingRequestOutput]:
        """Start a pooling (embedding) request; its stream yields one output."""
        return self._start(prompt, pooling_params or PoolingParams(), request_id, priority, None)

    async def compile_structured(self, params: SamplingParams, timeout_s: float) -> None:
        """Compile ``params``' constraint on a worker thread (or find it in the cache), so
        that starting the request finds it ready and the event loop never waits on a
        compile; ``ParamError`` naming the field if it is invalid or takes longer than
        ``timeout_s``."""
        if params.structured_outputs is not None:
            await anyio.to_thread.run_sync(self._inputs().compile_grammar, params, timeout_s)

    @property
    def grammar_compiles(self) -> int:
        """Structured-output grammars compiled so far (a repeated spec compiles once)."""
        return self._inputs().grammars.compiles

    def chat(
        self,
        messages: Conversation,
        sampling_params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        priority: int = 0,
        chat_template: str | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict[str, Any]] | None = None,
        lora_request: LoRARequest | None = None,
    ) -> EngineStream[RequestOutput]:
        """Like :meth:`generate`, on a conversation rendered through the chat template."""
        self.check_admission()  # before rendering: a refusal costs almost nothing
        prompt = self.render_chat(
            messages,
            chat_template,
            chat_template_kwargs,
            add_generation_prompt,
            continue_final_message,
            tools,
        )
        return self.generate(
            prompt,
            sampling_params,
            request_id=request_id,
            priority=priority,
            lora_request=lora_request,
        )
