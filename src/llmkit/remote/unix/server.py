"""msgpack over a unix socket: :func:`serve_unix` exposes an engine to local processes.

::

    async with AsyncEngine(config) as engine, serve_unix(engine, "/run/llmkit.sock"):
        await anyio.sleep_forever()

Another process talks to it through :class:`~llmkit.remote.unix.client.EngineClient`,
which implements the same engine protocol as ``AsyncEngine``. The
messages are those of :mod:`llmkit.remote.unix.protocol`, framed by
:mod:`llmkit.remote.framing`.
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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path

import anyio
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup

from llmkit.engine.protocol import EngineProtocol
from llmkit.protocol.messages import error_message
from llmkit.remote.framing import DEFAULT_MAX_FRAME_BYTES, pack
from llmkit.remote.unix.connect import shutdown_socket
from llmkit.remote.unix.connection import CONNECTION_ERRORS, UnixConnection

logger = logging.getLogger(__name__)

_CLOSE_TIMEOUT_S = 5.0


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
            tg.start_soon(_accept_until_closed, listener, server.handle, tg)
            try:
                yield
            finally:
                # Closed rather than cancelled, the listener and the connections alike: a
                # cancelled wait on a socket races, on asyncio, with the socket turning ready.
                with anyio.CancelScope(shield=True):
                    await listener.aclose()
                    await server.close_connections()
                tg.cancel_scope.cancel()  # only connections that outlived the close timeout
    finally:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == inode:  # still ours, not a successor's
                os.unlink(path)


async def _accept_until_closed(
    listener: SocketListener, handle: Callable[[SocketStream], Awaitable[None]], tg: TaskGroup
) -> None:
    """Hand each connection to ``handle`` in ``tg`` until the listener is closed."""
    with contextlib.suppress(anyio.ClosedResourceError):
        await listener.serve(handle, tg)


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
        self._all_closed = anyio.Event()
        self._all_closed.set()

    async def close_connections(self) -> None:
        """End every connection; their requests are aborted on the way out."""
        # Shut down rather than cancelled: cancelling a wait on a socket races, on asyncio,
        # with the socket turning readable.
        for stream in list(self._live):
            shutdown_socket(stream)
        with anyio.move_on_after(_CLOSE_TIMEOUT_S):
            await self._all_closed.wait()

    async def handle(self, stream: SocketStream) -> None:
        number = next(self._numbers)
        self._live.add(stream)
        if self._all_closed.is_set():
            self._all_closed = anyio.Event()
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
                await UnixConnection(
                    self._engine, stream, f"u{self._server_tag}.{number}-", self._max_frame_bytes
                ).serve()
            except CONNECTION_ERRORS:
                pass  # the peer went away; its requests were aborted on the way out
            except Exception:
                logger.exception("unix socket: connection %d failed", number)
            finally:
                self._live.discard(stream)
                if not self._live:
                    self._all_closed.set()
                logger.info("unix socket: connection %d closed", number)
