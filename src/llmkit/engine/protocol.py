"""The engine protocol: what serving/ and every transport may use of an engine.

An in-process :class:`~llmkit.engine.async_engine.AsyncEngine`, a client of an engine in
another process (the unix-socket ``EngineClient``) and a group of replicas all implement
it, so ``create_app`` serves any of them unchanged. Input processing (tokenization, chat
rendering, checks) happens on the caller's side of the protocol and raises ``ValueError``
before anything is queued.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, runtime_checkable

from llmkit.lora_request import LoRARequest
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats, ModelInfo

if TYPE_CHECKING:
    from llmkit.engine.core.tokenizer import Tokenizer


class TokensPrompt(TypedDict, total=False):
    """A prompt as token ids, with the text they came from when there is one."""

    prompt: str | None
    prompt_token_ids: list[int]


# A string, token ids, or ``{"prompt": ...}`` / ``{"prompt_token_ids": ...}``.
PromptType = str | list[int] | TokensPrompt | dict[str, Any]
EngineOutput = RequestOutput | EmbeddingRequestOutput
Conversation = list[dict[str, Any]]


Output_co = TypeVar("Output_co", RequestOutput, EmbeddingRequestOutput, covariant=True)


class OutputStream(Protocol[Output_co]):
    """One request's outputs; leaving the ``async for`` early (or ``aclose``) aborts it."""

    @property
    def request_id(self) -> str: ...

    def __aiter__(self) -> AsyncIterator[Output_co]: ...

    async def __anext__(self) -> Output_co: ...

    async def aclose(self) -> None: ...

    def close(self) -> None:
        """Abort the request if it still runs; needs no event loop (``aclose`` is the same)."""
        ...


@runtime_checkable
class EngineProtocol(Protocol):
    """The engine's public surface. ``generate``/``encode``/``chat`` raise ``ValueError`` for
    bad input and :class:`~llmkit.errors.LLMKitError` subclasses when the engine cannot
    take work (``EngineOverloadedError`` when its queue is full); their streams raise
    ``LLMKitError`` subclasses if the engine fails."""

    @property
    def model_info(self) -> ModelInfo: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    def tokenize(self, prompt: PromptType, truncate: int | None = None) -> TokensPrompt:
        """Checked token ids of ``prompt``; ``truncate`` keeps the last ones (-1: max_model_len)."""
        ...

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
        ...

    def generate(
        self,
        prompt: PromptType,
        sampling_params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        priority: int = 0,
        lora_request: LoRARequest | None = None,
    ) -> OutputStream[RequestOutput]: ...

    def encode(
        self,
        prompt: PromptType,
        pooling_params: PoolingParams | None = None,
        *,
        request_id: str | None = None,
        priority: int = 0,
    ) -> OutputStream[EmbeddingRequestOutput]: ...

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
    ) -> OutputStream[RequestOutput]: ...

    async def abort(self, request_id: str) -> None: ...

    async def add_lora(self, lora_request: LoRARequest) -> None:
        """Read and check a LoRA adapter ahead of its first request; ``ValueError`` if it
        cannot serve (LoRA off, not a PEFT folder, rank too high, unsupported targets, made
        for another model)."""
        ...

    async def remove_lora(self, lora_id: int) -> bool:
        """Forget an adapter (requests already running with it finish); False if unknown."""
        ...

    async def reset_prefix_cache(self) -> bool:
        """Forget the cached prompt prefixes (blocks no running request holds); False where
        this engine cannot (an engine over the unix socket has no command for it)."""
        ...

    def stats(self) -> EngineStats: ...

    async def compile_structured(self, params: SamplingParams, timeout_s: float) -> None:
        """Compile ``params``' structured-output constraint off the event loop (or find it
        cached) before the request starts; ``ParamError`` if it is invalid or slower than
        ``timeout_s``."""
        ...

    @property
    def grammar_compiles(self) -> int:
        """Structured-output grammars compiled so far."""
        ...

    def check_admission(self) -> None:
        """Raise :class:`~llmkit.errors.EngineOverloadedError` if a new request would be
        refused now; transports call it before any tokenization or template rendering."""
        ...

    def is_healthy(self) -> bool: ...

    async def __aenter__(self) -> EngineProtocol: ...

    async def __aexit__(self, *exc_info: object) -> None: ...
