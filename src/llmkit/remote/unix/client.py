"""EngineClient: an engine in another process, reached over its unix socket, as an EngineProtocol.

Input is checked and tokenized here, with the engine's own tokenizer (its directory is on
the same machine), so bad input raises ``ValueError`` before anything is sent. One
connection carries every request; a reader task hands each request's outputs to its
stream, merging what a slow reader has not taken yet, and a writer task sends what the
streams queue, so closing a stream (even from a finaliser) needs no event loop.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from anyio.abc import SocketStream, TaskGroup

from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.frontend import EngineFrontend
from llmkit.engine.loop import threadsafe_scheduler
from llmkit.engine.processor import InputProcessor, new_request_id
from llmkit.engine.protocol import (
    PromptType,
)
from llmkit.engine.sched.admission import stats_refusal
from llmkit.errors import EngineDeadError, EngineNotStartedError, LLMKitError
from llmkit.lora_request import LoRARequest
from llmkit.protocol.messages import Message
from llmkit.remote.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameError,
    FrameReader,
    frame_size,
    pack,
)
from llmkit.remote.output_assembly import wire_params
from llmkit.remote.unix.client_stream import ClientRequest, ClientStream
from llmkit.remote.unix.connect import handshake, shutdown_socket
from llmkit.remote.unix.data import model_info_from_wire, output_from_wire, stats_from_wire
from llmkit.remote.unix.protocol import (
    abort_request,
    close_request,
    error_from_wire,
    submit_request,
)
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats

logger = logging.getLogger(__name__)

_CLOSE_TIMEOUT_S = 5.0
_CONNECTION_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class EngineClient(EngineFrontend):
    """The engine served at ``path`` by :func:`~llmkit.remote.unix.server.serve_unix`::

        async with EngineClient("/run/llmkit.sock") as engine:
            async for out in engine.generate("Hello", SamplingParams(max_tokens=8)):
                print(out.outputs[0].text)

    It implements :class:`~llmkit.engine.protocol.EngineProtocol`, so ``create_app`` serves
    it as it would an ``AsyncEngine``. If the engine's process dies or the connection
    drops, every open stream raises ``EngineDeadError`` and ``is_healthy()`` is False.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    ):
        self.path = os.fspath(path)
        self._max_frame_bytes = max_frame_bytes
        self._server_max_frame_bytes = max_frame_bytes
        self._processor: InputProcessor | None = None
        self._socket: SocketStream | None = None
        self._tasks: TaskGroup | None = None
        self._requests: dict[str, ClientRequest] = {}  # by wire id
        self._wire_ids: dict[str, str] = {}  # request id -> wire id
        self._numbers = itertools.count()
        self._outbox: deque[bytes] = deque()
        self._writer_wake: anyio.Event | None = None
        self._dead: str | None = None  # why the connection is over
        self._stats: EngineStats | None = None
        self._healthy = False
        self._loop_thread: int | None = None
        self._schedule: Callable[[Callable[[], None]], object] | None = None

    # ---- lifetime ------------------------------------------------------------------

    async def __aenter__(self) -> EngineClient:
        """Connect, shake hands, and load the engine's tokenizer."""
        if self._socket is not None or self._dead is not None:
            raise LLMKitError("an EngineClient connects once; make a new one")
        stream, reader, hello = await handshake(self.path, self._max_frame_bytes)
        try:
            info = model_info_from_wire(hello["model_info"])
            tokenizer = await anyio.to_thread.run_sync(Tokenizer, info.tokenizer)
        except BaseException:
            await stream.aclose()
            raise
        self._stats = stats_from_wire(hello["stats"])
        self._healthy = bool(hello["healthy"])
        self._server_max_frame_bytes = hello["max_frame_bytes"]
        self._socket = stream
        self._processor = InputProcessor(info, tokenizer)
        self._loop_thread = threading.get_ident()
        self._schedule = threadsafe_scheduler()
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._read, reader)
        self._tasks.start_soon(self._write)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        """Disconnect: the engine aborts what still runs; open streams raise EngineDeadError."""
        tasks, stream = self._tasks, self._socket
        if tasks is None or stream is None:
            return
        self._tasks = None
        self._fail("the client was closed")
        # Shutting the socket down ends the reader and writer at EOF. Cancelling them in a
        # wait on the socket instead races, on asyncio, with the socket turning readable.
        shutdown_socket(stream)
        tasks.cancel_scope.deadline = anyio.current_time() + _CLOSE_TIMEOUT_S
        try:
            # The tasks end on their own, so there is nothing for the group to swallow.
            await tasks.__aexit__(*exc_info)
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    def is_healthy(self) -> bool:
        return self._dead is None and self._processor is not None and self._healthy

    def stats(self) -> EngineStats:
        """The engine's stats as it last sent them (it sends them when they change)."""
        self._inputs()
        assert self._stats is not None
        return self._stats

    def check_admission(self) -> None:
        """Refuse (EngineOverloadedError) by the queue the engine last reported; the engine
        checks again when the request arrives, and a refusal there fails its stream."""
        error = stats_refusal(self.stats())
        if error is not None:
            raise error

    async def add_lora(self, lora_request: LoRARequest) -> None:
        """Refused (ValueError): the socket carries an adapter with each request, where the
        engine reads it at its first use, but has no command to load or remove one ahead."""
        raise ValueError(
            f"cannot load adapter {lora_request.name!r} ahead over the unix socket; pass it as "
            "lora_request with each request instead"
        )

    async def remove_lora(self, lora_id: int) -> bool:
        """False: this client never adds an adapter."""
        return False

    async def reset_prefix_cache(self) -> bool:
        """False: the socket has no command for it (the engine's own process can)."""
        return False

    async def abort(self, request_id: str) -> None:
        """Abort a request; its reader gets a final output with finish reason "abort"."""
        wire_id = self._wire_ids.get(request_id)
        if wire_id is not None and self._dead is None:
            self._send(pack(abort_request(wire_id)))

    def _start(
        self,
        prompt: PromptType,
        params: SamplingParams | PoolingParams,
        request_id: str | None,
        priority: int,
        lora: LoRARequest | None,
    ) -> ClientStream[Any]:
        if self._dead is not None:
            raise EngineDeadError(f"the engine is not reachable: {self._dead}")
        processor = self._inputs()
        if not self._healthy:
            raise EngineDeadError(f"the engine at {self.path} reports that it is not running")
        self.check_admission()
        tokens = processor.prepare(prompt, params)
        request_id = request_id or new_request_id()
        if request_id in self._wire_ids:
            raise ValueError(f"request id {request_id!r} is already in use")
        wire_id = format(next(self._numbers), "x")
        kind = "encode" if isinstance(params, PoolingParams) else "generate"
        frame = pack(submit_request(kind, wire_id, tokens, wire_params(params), priority, lora))
        if frame_size(frame) > self._server_max_frame_bytes:
            raise ValueError(
                f"the request is {frame_size(frame)} bytes long encoded, more than the engine "
                f"takes ({self._server_max_frame_bytes} bytes)"
            )
        request = self._requests[wire_id] = ClientRequest(request_id, wire_id, params)
        self._wire_ids[request_id] = wire_id
        self._send(frame)
        stream: ClientStream[Any] = ClientStream(request, lambda: self._dead, self._drop)
        return stream

    def _inputs(self) -> InputProcessor:
        if self._processor is None:
            raise EngineNotStartedError(
                "the client is not connected: use `async with EngineClient(path) as engine`"
            )
        return self._processor

    def _forget(self, request: ClientRequest) -> None:
        self._requests.pop(request.wire_id, None)
        if self._wire_ids.get(request.request_id) == request.wire_id:
            del self._wire_ids[request.request_id]

    def _drop(self, request: ClientRequest) -> None:
        """A stream was closed: forget its request, and abort it if it still runs."""
        if threading.get_ident() != self._loop_thread:
            # A finaliser on another thread: do it on the loop (gone: nothing to abort).
            if self._schedule is not None:
                with contextlib.suppress(RuntimeError):
                    self._schedule(partial(self._drop, request))
            return
        if self._requests.get(request.wire_id) is request:
            self._forget(request)
            if self._dead is None:
                self._send(pack(close_request(request.wire_id)))

    # ---- the connection's tasks ------------------------------------------------------

    def _send(self, frame: bytes) -> None:
        self._outbox.append(frame)
        self._wake_writer()

    def _wake_writer(self) -> None:
        if self._writer_wake is not None:
            self._writer_wake.set()

    async def _write(self) -> None:
        assert self._socket is not None
        try:
            while self._dead is None:
                if not self._outbox:
                    self._writer_wake = anyio.Event()
                    await self._writer_wake.wait()
                    continue
                frames = [self._outbox.popleft() for _ in range(len(self._outbox))]
                await self._socket.send(b"".join(frames))
        except _CONNECTION_ERRORS as exc:
            self._fail(f"the connection to the engine at {self.path} broke ({exc!r})")

    async def _read(self, reader: FrameReader) -> None:
        try:
            while True:
                self._dispatch(await reader.receive())
        except anyio.EndOfStream:
            self._fail(f"the engine at {self.path} closed the connection")
        except _CONNECTION_ERRORS as exc:
            self._fail(f"the connection to the engine at {self.path} broke ({exc!r})")
        except FrameError as exc:
            self._fail(f"the engine at {self.path} sent a bad frame: {exc}")
        except Exception as exc:
            logger.exception("bad message from the engine at %s", self.path)
            self._fail(f"the engine at {self.path} sent a bad message ({exc!r})")

    def _dispatch(self, message: Message) -> None:
        kind = message["type"]
        if kind in ("output", "final"):
            request = self._requests.get(message["id"])
            if request is None:
                return  # its stream was closed; the engine had sent this before it knew
            request.assembler.add(output_from_wire(message["output"], request.request_id))
            if kind == "final":
                self._forget(request)
            request.wake()
        elif kind == "error":
            if message["id"] is None:  # about the connection, which the engine closes next
                logger.warning("the engine at %s: %s", self.path, message["error"]["message"])
                return
            request = self._requests.get(message["id"])
            if request is None:
                return  # about a request whose stream was closed here
            self._forget(request)
            request.error = error_from_wire(message["error"])
            request.wake()
        elif kind == "stats":
            self._stats = stats_from_wire(message["stats"])
            self._healthy = bool(message["healthy"])
        elif kind == "health":
            self._healthy = bool(message["healthy"])

    def _fail(self, why: str) -> None:
        """The connection is over: every open stream raises EngineDeadError."""
        if self._dead is not None:
            return
        self._dead = why
        self._healthy = False
        self._wake_writer()
        for request in list(self._requests.values()):
            request.wake()
