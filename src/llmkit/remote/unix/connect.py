"""Connecting to an engine's unix socket: the handshake, and ending a connection."""

from __future__ import annotations

import contextlib
import errno
import os
import socket

import anyio
from anyio.abc import SocketAttribute, SocketStream

from llmkit.engine.protocol import ModelInfo
from llmkit.protocol.messages import Message
from llmkit.remote.framing import DEFAULT_MAX_FRAME_BYTES, FrameReader, pack
from llmkit.remote.unix.data import model_info_from_wire
from llmkit.remote.unix.protocol import PROTOCOL_VERSION, hello_request

HANDSHAKE_TIMEOUT_S = 30.0


async def fetch_model_info(path: str | os.PathLike[str]) -> ModelInfo:
    """The model the engine at ``path`` serves, from a handshake alone."""
    stream, _, hello = await handshake(os.fspath(path), DEFAULT_MAX_FRAME_BYTES)
    await stream.aclose()
    return model_info_from_wire(hello["model_info"])


async def handshake(path: str, max_frame_bytes: int) -> tuple[SocketStream, FrameReader, Message]:
    """A connection to ``path`` that said hello; returns it, its reader and the engine's hello."""
    stream = await anyio.connect_unix(path)
    try:
        reader = FrameReader(stream, max_frame_bytes)
        with anyio.fail_after(HANDSHAKE_TIMEOUT_S):
            await stream.send(pack(hello_request()))
            reply = await reader.receive()
    except anyio.EndOfStream:
        await stream.aclose()
        raise ConnectionError(
            f"the engine at {path} closed the connection during the handshake"
        ) from None
    except BaseException:
        await stream.aclose()
        raise
    if reply.get("type") == "hello" and reply.get("version") == PROTOCOL_VERSION:
        return stream, reader, reply
    await stream.aclose()
    if reply.get("type") == "error":
        error = reply["error"]
        if error.get("code") == "permission_denied":
            raise PermissionError(errno.EACCES, error["message"], path)
        raise ConnectionError(f"the engine at {path} refused the connection: {error['message']}")
    raise ConnectionError(
        f"the engine at {path} does not speak protocol version {PROTOCOL_VERSION}"
    )


def shutdown_socket(stream: SocketStream) -> None:
    """Both directions of ``stream`` end: a pending read sees EOF, a pending write an error."""
    with contextlib.suppress(OSError):
        stream.extra(SocketAttribute.raw_socket).shutdown(socket.SHUT_RDWR)
