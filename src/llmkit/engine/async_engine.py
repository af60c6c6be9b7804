"""AsyncEngine: the object apps embed. The core steps in its own thread; callers stream.

Every request gets a :class:`~llmkit.engine.request_stream.RequestStream`; commands
(add, abort) reach the core thread through a queue, and outputs come back through the
request's state.
"""

from __future__ import annotations

import logging
import threading
import weakref
from concurrent.futures import Future
from typing import Any

import anyio

from llmkit.config import EngineConfig
from llmkit.engine.commands import CommandQueue
from llmkit.engine.core.engine_core import EngineCore
from llmkit.engine.core.output_state import RequestState
from llmkit.engine.core.tokenizers import Tokenizers
from llmkit.engine.core.watchdog import Watchdog
from llmkit.engine.frontend import EngineFrontend
from llmkit.engine.processor import InputProcessor
from llmkit.engine.protocol import (
    PromptType,
)
from llmkit.engine.request_stream import RequestStream
from llmkit.errors import EngineDeadError, EngineNotStartedError
from llmkit.lora_request import LoRARequest
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats

logger = logging.getLogger(__name__)


class AsyncEngine(EngineFrontend):
    """Continuous batching for an async app::

        async with AsyncEngine(EngineConfig(model="demo")) as engine:
            async for out in engine.generate("Hello", SamplingParams(max_tokens=8)):
                print(out.outputs[0].text)

    It implements :class:`~llmkit.engine.protocol.EngineProtocol`, the surface every
    transport uses; its front half (tokenize, render_chat, generate, encode, chat) is
    :class:`~llmkit.engine.frontend.EngineFrontend`'s. ``tokenizers``: tokenizers kept
    between engines (a model manager's), to take this one's from.
    """

    def __init__(
        self,
        config: EngineConfig | str | None = None,
        *,
        tokenizers: Tokenizers | None = None,
        **kwargs: Any,
    ):
        if isinstance(config, str):
            config = EngineConfig.from_kwargs(config, **kwargs)
        elif config is None:
            config = EngineConfig.from_kwargs(**kwargs)
        elif kwargs:
            raise TypeError("pass either an EngineConfig or keyword fields, not both")
        self.config = config
        self._core = EngineCore(config, tokenizers)
        self._processor = InputProcessor(self._core.model_info, self._core.tokenizer)
        self._commands = CommandQueue()
        # Weak: the reader's reference is what keeps a stream alive, so dropping it
        # (breaking out of ``async for``) finalises the stream and aborts the request.
        self._streams: weakref.WeakValueDictionary[str, RequestStream[Any]] = (
            weakref.WeakValueDictionary()
        )
        # Re-entrant: a dropped stream may be finalised while this thread holds it.
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._dead: BaseException | None = None
        self._stopping = False
        self._stats = self._core.stats()
        # Over the core, not self: a closure over self would put the engine in a reference
        # cycle, which only a garbage collection frees (a model's memory, after shutdown).
        core = self._core
        self._watchdog = Watchdog(lambda: core.num_requests, config.watchdog_timeout_s)

    # ---- lifetime ------------------------------------------------------------------

    async def __aenter__(self) -> AsyncEngine:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    def start(self) -> None:
        """Start the step loop (``async with`` does this)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="llmkit-engine", daemon=True)
        self._thread.start()
        self._watchdog.start()

    async def shutdown(self) -> None:
        """Abort what is in flight (finish reason "abort") and stop the step loop."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        self._stopping = True
        self._commands.submit(lambda core: None)
        await anyio.to_thread.run_sync(thread.join)

    def is_healthy(self) -> bool:
        """Whether the step loop runs and is not stalled (see ``watchdog_timeout_s``)."""
        alive = self._dead is None and self._thread is not None and self._thread.is_alive()
        return alive and self._watchdog.stalled_for() is None

    def stats(self) -> EngineStats:
        """The snapshot the core published after its last step or command."""
        return self._stats

    def check_admission(self) -> None:
        """Raise ``EngineOverloadedError`` if a new request would be refused now (queue full)."""
        self._core.check_admission()

    def _inputs(self) -> InputProcessor:
        return self._processor

    # ---- requests ------------------------------------------------------------------

    async def abort(self, request_id: str) -> None:
        """Abort a request; its reader gets a final output with finish reason "abort"."""
        self._commands.submit(lambda core: self._notify(core.abort(request_id)))

    async def add_lora(self, lora_request: LoRARequest) -> None:
        """Read and check an adapter before its first request; ValueError if it cannot serve."""
        await anyio.to_thread.run_sync(self._core.lora_adapter, lora_request)

    async def remove_lora(self, lora_id: int) -> bool:
        """Forget an adapter; requests already running with it finish with it."""
        return self._core.remove_lora(lora_id)

    async def reset_prefix_cache(self) -> bool:
        """Forget the cached prompt prefixes, between two steps of the core thread."""
        done: Future[int] = Future()

        def reset(core: EngineCore) -> None:
            try:
                done.set_result(core.reset_prefix_cache())
            except BaseException as exc:  # the caller hears of it, not only the log
                done.set_exception(exc)
                raise

        self._commands.submit(reset)
        # A core that stopped runs no command: the wait ends rather than hangs.
        forgotten = await anyio.to_thread.run_sync(lambda: done.result(timeout=30))
        logger.info("prefix cache reset: %d cached blocks forgotten", forgotten)
        return True

    def _start(
        self,
        prompt: PromptType,
        params: SamplingParams | PoolingParams,
        request_id: str | None,
        priority: int,
        lora: LoRARequest | None,
    ) -> RequestStream[Any]:
        """Check, admit and queue a request; its stream's output type follows ``params``.

        Raises ``EngineOverloadedError`` when the queue is full (see EngineConfig).
        """
        if self._dead is not None or self._stopping:
            raise EngineDeadError("the engine is not running")
        if self._thread is None:
            raise EngineNotStartedError(
                "the engine is not started: use `async with engine` or start()"
            )
        self.check_admission()  # before tokenizing: a refusal costs almost nothing
        state, requests = self._processor.process(prompt, params, request_id, priority, lora)
        adapter = None if lora is None else self._core.lora_adapter(lora)
        stream: RequestStream[Any] = RequestStream(state, lambda: self._dead, self._release)
        with self._lock:
            if state.request_id in self._streams:
                raise ValueError(f"request id {state.request_id!r} is already in use")
            self._core.reserve(len(state.prompt_token_ids))
            self._streams[state.request_id] = stream
        self._commands.submit(lambda core: self._notify(core.add(state, requests, adapter)))
        return stream

    def _release(self, state: RequestState) -> None:
        """The reader is gone: forget its stream and abort the request if it still runs."""
        with self._lock:
            self._streams.pop(state.request_id, None)
        if not state.finished:
            self._commands.submit(lambda core: core.abort(state.request_id))

    # ---- the core thread -------------------------------------------------------------

    def _run(self) -> None:
        core = self._core
        try:
            while True:
                if self._commands.run_all(core):
                    # New and aborted requests show in stats() now, not after the next step.
                    self._stats = core.stats()
                if self._stopping:
                    for state in core.abort_all():
                        self._notify(state)
                    break
                if not core.has_work():
                    self._stats = core.stats()
                    self._commands.wait()
                    self._watchdog.progress()
                    continue
                for state in core.step():
                    self._notify(state)
                self._watchdog.progress()
                self._stats = core.stats()
        except BaseException as exc:
            logger.exception("the engine's step loop died")
            self._dead = exc
        finally:
            self._watchdog.stop()
            # Tensor-parallel workers end with the loop; a sound engine's prefixes go to the
            # prompt cache's tiers.
            core.close(keep_cache=self._dead is None)
            self._stats = core.stats()
            if self._dead is None:
                self._dead = EngineDeadError("the engine was shut down")
            with self._lock:
                streams = list(self._streams.values())
            for stream in streams:
                stream._wake_from_core()

    def _notify(self, state: RequestState | None) -> None:
        if state is None:
            return
        with self._lock:
            stream = self._streams.get(state.request_id)
        if stream is not None:
            stream._wake_from_core()
