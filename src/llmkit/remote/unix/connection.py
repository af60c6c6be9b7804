"""One client of :func:`~llmkit.remote.unix.server.serve_unix`: its messages read in order,
its requests each streamed to it by a task, its writes batched."""

from __future__ import annotations

from typing import Any

import anyio
from anyio.abc import SocketStream, TaskGroup

from llmkit.engine.protocol import EngineProtocol, OutputStream
from llmkit.errors import LLMKitError
from llmkit.protocol.messages import Message, ProtocolError, error_message, protocol_error_message
from llmkit.remote.framing import FrameError, FrameReader, pack
from llmkit.remote.unix.connect import shutdown_socket
from llmkit.remote.unix.protocol import (
    PROTOCOL_VERSION,
    Abort,
    Close,
    Hello,
    Query,
    Submit,
    engine_error_message,
    health_message,
    hello_reply,
    output_message,
    parse_client_message,
    stats_message,
)
from llmkit.sampling_params import SamplingParams

# How often each connection is sent the engine's stats, when they changed.
STATS_INTERVAL_S = 0.05
CONNECTION_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class _Outbox:
    """A connection's writer: frames sent in the same moment go out in one write.

    ``send`` returns once its frame is written, so a request's task holds at most one
    frame here, and reads its engine stream (which coalesces meanwhile) only after. Once
    closed, ``send`` returns at once: nobody reads the frames of a connection that is over.
    """

    def __init__(self, stream: SocketStream):
        self._stream = stream
        self._frames: list[bytes] = []
        self._ready = anyio.Event()
        self._written = anyio.Event()
        self._open = True

    async def send(self, frame: bytes) -> None:
        if self._open:
            self._frames.append(frame)
            self._ready.set()
            await self._written.wait()

    def close(self) -> None:
        """Stop the writer once its write in progress ends; release every sender."""
        self._open = False
        self._ready.set()
        self._written.set()

    async def run(self) -> None:
        """Write until closed; raises CONNECTION_ERRORS when the peer is gone."""
        while True:
            await self._ready.wait()
            if not self._open:
                return
            self._ready = anyio.Event()
            frames, self._frames = self._frames, []
            written, self._written = self._written, anyio.Event()
            await self._stream.send(b"".join(frames))
            written.set()


class _Request:
    def __init__(self, stream: OutputStream[Any]):
        self.stream = stream
        self.scope = anyio.CancelScope()


class UnixConnection:
    """One client: its messages read in order, its requests each streamed by a task."""

    def __init__(
        self, engine: EngineProtocol, stream: SocketStream, tag: str, max_frame_bytes: int
    ):
        self._engine = engine
        self._socket = stream
        self._reader = FrameReader(stream, max_frame_bytes)
        self._max_frame_bytes = max_frame_bytes
        self._outbox = _Outbox(stream)
        self._tag = tag  # makes engine request ids unique across connections
        self._requests: dict[str, _Request] = {}

    async def serve(self) -> None:
        """Until the peer leaves or breaks the framing; its requests are aborted after.

        The connection ends by shutting its socket down, never by cancelling a task that
        waits on the socket: on asyncio such a cancel races with the socket turning
        readable or writable (anyio then resolves the cancelled wait: InvalidStateError).
        The writer runs outside the group that is cancelled for that reason.
        """
        async with anyio.create_task_group() as writer:
            writer.start_soon(self._write)
            try:
                async with anyio.create_task_group() as tg:
                    if await self._handshake():
                        tg.start_soon(self._push_stats)
                        await self._read(tg)
                    tg.cancel_scope.cancel()  # requests and the stats push: no socket waits
            finally:
                shutdown_socket(self._socket)  # a write in progress fails at once
                self._outbox.close()

    async def _write(self) -> None:
        """The outbox's writer; when the peer is gone, the reader is woken by a shutdown."""
        try:
            await self._outbox.run()
        except CONNECTION_ERRORS:
            pass  # the peer is gone
        finally:
            self._outbox.close()
            shutdown_socket(self._socket)  # the reader sees EOF and ends the connection

    async def _send(self, message: Message) -> None:
        await self._outbox.send(pack(message))

    async def _receive(self) -> object:
        """The next message, or None when the connection is over (after telling the peer why)."""
        try:
            return await self._reader.receive()
        except (anyio.EndOfStream, *CONNECTION_ERRORS):
            return None
        except FrameError as exc:
            await self._send(error_message(str(exc), code=exc.code))
            return None

    async def _handshake(self) -> bool:
        obj = await self._receive()
        if obj is None:
            return False
        try:
            message = parse_client_message(obj)
        except ProtocolError as exc:
            await self._send(protocol_error_message(exc))
            return False
        if not isinstance(message, Hello):
            await self._send(
                error_message("the first message must be hello", code="handshake_required")
            )
            return False
        if message.version != PROTOCOL_VERSION:
            await self._send(
                error_message(
                    f"protocol version {message.version} is not supported; this engine speaks "
                    f"version {PROTOCOL_VERSION}",
                    param="version",
                    code="unsupported_version",
                )
            )
            return False
        engine = self._engine
        await self._send(
            hello_reply(
                engine.model_info, engine.stats(), engine.is_healthy(), self._max_frame_bytes
            )
        )
        return True

    async def _read(self, tg: TaskGroup) -> None:
        while (obj := await self._receive()) is not None:
            await self._handle(obj, tg)

    async def _handle(self, obj: object, tg: TaskGroup) -> None:
        """Act on one message; one that cannot be served gets an error, and the connection stays."""
        try:
            message = parse_client_message(obj)
            if isinstance(message, Submit):
                await self._submit(message, tg)
            elif isinstance(message, Abort):
                await self._abort(message.id)
            elif isinstance(message, Close):
                self._close(message.id)
            elif isinstance(message, Query):
                await self._answer(message)
            else:
                raise ProtocolError("hello was already done on this connection", "type")
        except ProtocolError as exc:
            await self._send(protocol_error_message(exc))

    async def _submit(self, message: Submit, tg: TaskGroup) -> None:
        rid = message.id
        if rid in self._requests:
            raise ProtocolError(
                f"id {rid!r} is already in use on this connection",
                "id",
                "duplicate_request_id",
                rid,
            )
        engine, params, engine_id = self._engine, message.params, self._tag + rid
        stream: OutputStream[Any]
        try:
            if isinstance(params, SamplingParams):
                stream = engine.generate(
                    message.prompt,
                    params,
                    request_id=engine_id,
                    priority=message.priority,
                    lora_request=message.lora,
                )
            else:
                stream = engine.encode(
                    message.prompt, params, request_id=engine_id, priority=message.priority
                )
        except (ValueError, LLMKitError) as exc:
            await self._send(engine_error_message(rid, exc))
            return
        request = self._requests[rid] = _Request(stream)
        tg.start_soon(self._stream, rid, request)

    async def _stream(self, rid: str, request: _Request) -> None:
        """Send the request's outputs, reading the next only once the last one is written."""
        with request.scope:
            first = True
            try:
                async for output in request.stream:
                    if output.finished:
                        # Forgotten before the final is sent, so the id is free when it arrives.
                        self._forget(rid, request)
                    await self._send(output_message(rid, output, first))
                    first = False
            except (ValueError, LLMKitError) as exc:
                self._forget(rid, request)
                await self._send(engine_error_message(rid, exc))
            finally:
                self._forget(rid, request)
                request.stream.close()

    def _forget(self, rid: str, request: _Request) -> None:
        if self._requests.get(rid) is request:
            del self._requests[rid]

    async def _abort(self, rid: str) -> None:
        if rid not in self._requests:
            raise ProtocolError(
                f"no request with id {rid!r} runs on this connection", "id", "unknown_request", rid
            )
        await self._engine.abort(self._tag + rid)

    def _close(self, rid: str) -> None:
        request = self._requests.pop(rid, None)
        if request is not None:
            # Closing the engine stream now frees the engine's id at once; the task ends after.
            request.stream.close()
            request.scope.cancel()

    async def _answer(self, query: Query) -> None:
        if query.kind == "stats":
            await self._send(stats_message(self._engine.stats(), self._engine.is_healthy()))
        else:
            await self._send(health_message(self._engine.is_healthy()))

    async def _push_stats(self) -> None:
        last = None
        while True:
            now = (self._engine.stats(), self._engine.is_healthy())
            if now != last:
                await self._send(stats_message(*now))
                last = now
            await anyio.sleep(STATS_INTERVAL_S)
