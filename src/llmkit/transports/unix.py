"""msgpack over a unix socket: :func:`serve_unix` exposes an engine to local processes.

::

    async with AsyncEngine(config) as engine, serve_unix(engine, "/run/llmkit.sock"):
        await anyio.sleep_forever()

Another process talks to it through :class:`~llmkit.transports.unix_client.EngineClient`
(re-exported here), which implements the same engine protocol as ``AsyncEngine``. The
messages are those of :mod:`llmkit.protocol.stream`, framed by
:mod:`llmkit.transports.framing`.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import socket
import stat
import struct
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskGroup

from llmkit.engine.protocol import EngineProtocol, OutputStream
from llmkit.errors import LLMKitError
from llmkit.protocol.stream import (
    PROTOCOL_VERSION,
    Abort,
    Close,
    Hello,
    Query,
    Submit,
    engine_error_message,
    error_message,
    health_message,
    hello_reply,
    output_message,
    parse_client_message,
    protocol_error_message,
    stats_message,
)
from llmkit.protocol.stream_data import Message, ProtocolError
from llmkit.sampling_params import SamplingParams
from llmkit.transports.framing import DEFAULT_MAX_FRAME_BYTES, FrameError, FrameReader, pack
from llmkit.transports.unix_client import EngineClient
from llmkit.transports.unix_connect import shutdown_socket

__all__ = ["EngineClient", "serve_unix"]

logger = logging.getLogger(__name__)

# How often each connection is sent the engine's stats, when they changed.
STATS_INTERVAL_S = 0.05
_CLOSE_TIMEOUT_S = 5.0
_CONNECTION_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


@contextlib.asynccontextmanager
async def serve_unix(
    engine: EngineProtocol,
    path: str | os.PathLike[str],
    *,
    allow_uids: Iterable[int] = (),
    allow_same_uid: bool = True,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> AsyncIterator[None]:
    """Serve ``engine`` on the unix socket ``path`` (Linux) until the block ends.

    Only peers whose uid is the server's own or root's (``allow_same_uid``) or in
    ``allow_uids`` may talk to it, as the kernel reports them (``SO_PEERCRED``). The socket
    file is made mode 0600, or 0666 when ``allow_uids`` names other users, who could not
    reach it otherwise; the peer check is what keeps everyone else out. A socket file
    left by a server that is gone is replaced; anything else at ``path`` is an error.
    ``max_frame_bytes`` bounds each incoming message. The engine is not started or
    stopped here: its owner does that.
    """
    owner = frozenset({os.getuid(), 0})
    allowed = frozenset(allow_uids) | (owner if allow_same_uid else frozenset())
    _remove_stale_socket(Path(path))
    listener = await anyio.create_unix_listener(path, mode=0o666 if allowed - owner else 0o600)
    inode = os.stat(path).st_ino
    server = _Server(engine, allowed, max_frame_bytes)
    try:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, server.handle)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    await server.close_connections()
                tg.cancel_scope.cancel()
    finally:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == inode:  # still ours, not a successor's
                os.unlink(path)


def _remove_stale_socket(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(
            errno.EEXIST, "exists and is not a socket; not replacing it", str(path)
        )
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()  # nobody listens: a server that is gone left it
            return
    raise OSError(errno.EADDRINUSE, "another server is listening on this socket", str(path))


def peer_credentials(stream: SocketStream) -> tuple[int, int]:
    """The (pid, uid) the kernel reports for the process at the other end."""
    sock = stream.extra(SocketAttribute.raw_socket)
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


class _Server:
    def __init__(self, engine: EngineProtocol, allowed: frozenset[int], max_frame_bytes: int):
        self._engine = engine
        self._allowed = allowed
        self._max_frame_bytes = max_frame_bytes
        self._numbers = itertools.count(1)
        # Engine request ids are unique across servers sharing one engine, and across a
        # restart while the last server's aborted requests are still being released.
        self._server_tag = uuid.uuid4().hex[:8]
        self._live: set[SocketStream] = set()

    async def close_connections(self) -> None:
        """End every connection; their requests are aborted on the way out."""
        # Shut down rather than cancelled: cancelling a wait on a socket races, on asyncio,
        # with the socket turning readable.
        for stream in list(self._live):
            shutdown_socket(stream)
        with anyio.move_on_after(_CLOSE_TIMEOUT_S):
            while self._live:
                await anyio.sleep(0.01)

    async def handle(self, stream: SocketStream) -> None:
        number = next(self._numbers)
        self._live.add(stream)
        async with stream:
            try:
                pid, uid = peer_credentials(stream)
                if uid not in self._allowed:
                    logger.warning(
                        "unix socket: refused pid %d (uid %d): uid not allowed", pid, uid
                    )
                    await stream.send(
                        pack(
                            error_message(
                                f"uid {uid} may not use this engine",
                                code="permission_denied",
                            )
                        )
                    )
                    return
                logger.info("unix socket: connection %d from pid %d (uid %d)", number, pid, uid)
                await _Connection(
                    self._engine, stream, f"u{self._server_tag}.{number}-", self._max_frame_bytes
                ).serve()
            except _CONNECTION_ERRORS:
                pass  # the peer went away; its requests were aborted on the way out
            except Exception:
                logger.exception("unix socket: connection %d failed", number)
            finally:
                self._live.discard(stream)
                logger.info("unix socket: connection %d closed", number)


class _Outbox:
    """A connection's writer: frames sent in the same moment go out in one write.

    ``send`` returns once its frame is written, so a request's task holds at most one
    frame here, and reads its engine stream (which coalesces meanwhile) only after.
    """

    def __init__(self, stream: SocketStream):
        self._stream = stream
        self._frames: list[bytes] = []
        self._ready = anyio.Event()
        self._written = anyio.Event()

    async def send(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._ready.set()
        await self._written.wait()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = anyio.Event()
            frames, self._frames = self._frames, []
            written, self._written = self._written, anyio.Event()
            await self._stream.send(b"".join(frames))
            written.set()


class _Request:
    def __init__(self, stream: OutputStream[Any]):
        self.stream = stream
        self.scope = anyio.CancelScope()


class _Connection:
    """One client: its messages read in order, its requests each streamed by a task."""

    def __init__(
        self, engine: EngineProtocol, stream: SocketStream, tag: str, max_frame_bytes: int
    ):
        self._engine = engine
        self._reader = FrameReader(stream, max_frame_bytes)
        self._max_frame_bytes = max_frame_bytes
        self._outbox = _Outbox(stream)
        self._tag = tag  # makes engine request ids unique across connections
        self._requests: dict[str, _Request] = {}

    async def serve(self) -> None:
        """Until the peer leaves or breaks the framing; its requests are aborted after."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write, tg)
            if await self._handshake():
                tg.start_soon(self._push_stats)
                await self._read(tg)
            tg.cancel_scope.cancel()

    async def _write(self, tg: TaskGroup) -> None:
        try:
            await self._outbox.run()
        except _CONNECTION_ERRORS:
            tg.cancel_scope.cancel()

    async def _send(self, message: Message) -> None:
        await self._outbox.send(pack(message))

    async def _receive(self) -> object:
        """The next message, or None when the connection is over (after telling the peer why)."""
        try:
            return await self._reader.receive()
        except (anyio.EndOfStream, *_CONNECTION_ERRORS):
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
