"""ServingContext: the engine and the server-wide settings every endpoint needs."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio

from llmkit.errors import EngineOverloadedError
from llmkit.plugins import REASONING_PARSERS, TOOL_PARSERS, load
from llmkit.reasoning import ReasoningParser
from llmkit.serving.errors import OpenAIError, bad_request, from_engine_error
from llmkit.serving.lora import ServedLoRAs
from llmkit.serving.metrics import RequestTracker, ServerMetrics
from llmkit.serving.options import ServingOptions
from llmkit.serving.responses_store import ResponseStore
from llmkit.serving.shutdown import Closing
from llmkit.tools import ToolParser

if TYPE_CHECKING:
    from llmkit.engine.protocol import EngineProtocol
    from llmkit.manager.manager import ModelManager

logger = logging.getLogger("llmkit.serving")

T = TypeVar("T")

# Threads that tokenize and render templates for the event loop: few, as each holds a core
# (the tokenizer releases the GIL) that the engine's own step would otherwise get.
_OFFLOAD_THREADS = 2


@dataclass
class ServingContext:
    """What a transport hands to the serving functions; one per served app."""

    engine: EngineProtocol
    model_names: list[str]
    chat_template: str | None = None
    log_prompts: bool = False
    max_log_len: int | None = None
    metrics: ServerMetrics | None = None
    options: ServingOptions = field(default_factory=ServingOptions)
    loras: ServedLoRAs = field(default_factory=ServedLoRAs)  # adapters served by name
    # Many named models (``engine`` is then the manager): each request holds its own.
    models: ModelManager | None = None
    # Set when the server is shutting down: new work is refused, in-flight work finishes.
    draining: bool = False
    # Set when the server waits no longer: what still runs ends itself (see Closing).
    closing: Closing = field(default_factory=Closing)
    # The Responses API's stored responses (store: true), for previous_response_id.
    responses: ResponseStore = field(default_factory=ResponseStore)
    # The parser classes options name, loaded from their plugins once (PluginError if not).
    tool_parser: type[ToolParser] | None = field(init=False, default=None)
    reasoning_parser: type[ReasoningParser] | None = field(init=False, default=None)
    _offload_limiter: anyio.CapacityLimiter = field(
        init=False, repr=False, default_factory=lambda: anyio.CapacityLimiter(_OFFLOAD_THREADS)
    )

    def __post_init__(self) -> None:
        if self.options.tool_call_parser:
            self.tool_parser = load(TOOL_PARSERS, self.options.tool_call_parser)
        if self.options.reasoning_parser:
            self.reasoning_parser = load(REASONING_PARSERS, self.options.reasoning_parser)

    async def offload(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` (tokenization, template rendering) on a bounded pool of worker
        threads, so a huge prompt never stalls the event loop and every other stream."""
        return await anyio.to_thread.run_sync(work, *args, limiter=self._offload_limiter)

    def bound(self, engine: EngineProtocol, name: str) -> ServingContext:
        """This context for one request to the manager's model ``name``, held as ``engine``;
        it shares everything server-wide (parsers, limits, shutdown, stored responses)."""
        ctx = dataclasses.replace(self, engine=engine, model_names=[name], models=None)
        ctx._offload_limiter = self._offload_limiter
        return ctx

    @property
    def model_name(self) -> str:
        return self.model_names[0]

    def resolve_model(self, requested: str | None) -> str:
        """The model name to answer with; an unknown name is a 404 as in OpenAI's API."""
        if not requested:
            return self.model_name
        if requested not in self.model_names and self.loras.get(requested) is None:
            raise OpenAIError(
                404, f"The model `{requested}` does not exist.", "model", "model_not_found"
            )
        return requested

    def admit(self, request: Any, request_id: str, task: Literal["generate", "embed"]) -> str:
        """The checks every model request passes first; returns the model name to answer with."""
        self.check_accepting()
        model = self.resolve_model(request.model)
        self.check_serves(task, model)
        self.note_unknown_fields(request_id, request.model_extra)
        return model

    def check_serves(self, task: Literal["generate", "embed"], model: str) -> None:
        """A 400 naming the right endpoints when the engine's task is not what the route needs."""
        info = self.engine.model_info
        if task == "generate" and not info.supports_generate:
            raise bad_request(
                f"The model `{model}` does not generate text: this server runs it as an "
                "embedding model. Use /v1/embeddings.",
                "model",
            )
        if task == "embed" and not info.supports_embed:
            raise bad_request(
                f"The model `{model}` does not produce embeddings: this server runs it for text "
                "generation. Use /v1/completions or /v1/chat/completions, or serve an embedding "
                "model (or this one with --task embed).",
                "model",
            )

    def check_accepting(self) -> None:
        """New work is refused (503) while draining, when the engine is not running, or when
        its queue is full (code ``overloaded``, with a retry hint): before any tokenizing."""
        if self.draining or self.closing.is_set():
            self.count_refusal("draining")
            raise OpenAIError(503, "the server is shutting down and accepts no new requests")
        if not self.engine.is_healthy():
            raise OpenAIError(503, "the engine is not running")
        try:
            self.engine.check_admission()
        except EngineOverloadedError as exc:
            raise self.engine_error(exc) from None

    def engine_error(self, exc: BaseException) -> OpenAIError:
        """The answer for an engine's failure or refusal; refusals are counted by reason."""
        if isinstance(exc, EngineOverloadedError):
            self.count_refusal(exc.reason)
        return from_engine_error(exc)

    def count_refusal(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.refused.labels(reason).inc()

    def track(self) -> RequestTracker:
        return RequestTracker(self.metrics)

    def note_unknown_fields(self, request_id: str, extra: dict[str, Any] | None) -> None:
        """Unknown fields are ignored, as OpenAI clients send fields a server may not know."""
        if extra:
            logger.warning(
                "request %s: ignoring unknown field(s): %s", request_id, ", ".join(sorted(extra))
            )

    def log_request(
        self, request_id: str, prompt: object, num_prompt_tokens: int, params: object
    ) -> None:
        """Prompts stay out of the logs unless the operator asked for them."""
        if not logger.isEnabledFor(logging.INFO):
            return
        if self.log_prompts:
            text = repr(prompt)
            if self.max_log_len is not None and len(text) > self.max_log_len:
                text = text[: self.max_log_len] + "..."
            logger.info(
                "request %s: %d prompt tokens, prompt=%s, params=%s",
                request_id,
                num_prompt_tokens,
                text,
                params,
            )
        else:
            logger.info("request %s: %d prompt tokens", request_id, num_prompt_tokens)
