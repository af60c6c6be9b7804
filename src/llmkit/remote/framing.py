"""Length-prefixed msgpack frames: a 4-byte big-endian length, then one msgpack message."""

from __future__ import annotations

from collections import deque
from typing import Any

import msgpack
from anyio.abc import ByteReceiveStream

from llmkit.protocol.text import UNICODE_ERRORS

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
_HEADER = 4
_READ_SIZE = 256 * 1024


class FrameError(Exception):
    """The byte stream is not a sequence of frames: the connection cannot go on."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


def pack(message: Any) -> bytes:
    """One frame holding ``message``."""
    payload = msgpack.packb(message, use_bin_type=True)
    return len(payload).to_bytes(_HEADER, "big") + payload


def frame_size(frame: bytes) -> int:
    """The payload size of a frame from :func:`pack`."""
    return len(frame) - _HEADER


class FrameReader:
    """Messages from a byte stream; a frame over ``max_frame_bytes`` is refused at its header."""

    def __init__(self, stream: ByteReceiveStream, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self._stream = stream
        self._max = max_frame_bytes
        self._buffer = bytearray()
        self._messages: deque[Any] = deque()

    async def receive(self) -> Any:
        """The next message; raises ``anyio.EndOfStream`` when the peer closed, FrameError."""
        while not self._messages:
            self._buffer += await self._stream.receive(_READ_SIZE)
            self._split()
        return self._messages.popleft()

    def _split(self) -> None:
        buffer, pos = self._buffer, 0
        with memoryview(buffer) as view:
            while len(buffer) - pos >= _HEADER:
                size = int.from_bytes(view[pos : pos + _HEADER], "big")
                if size > self._max:
                    raise FrameError(
                        f"a frame of {size} bytes is over this connection's limit of {self._max}",
                        "frame_too_large",
                    )
                end = pos + _HEADER + size
                if len(buffer) < end:
                    break
                try:
                    # Invalid UTF-8 in a string becomes surrogates, which the peer's
                    # protocol refuses in that request alone, naming the field.
                    message = msgpack.unpackb(
                        view[pos + _HEADER : end],
                        raw=False,
                        strict_map_key=False,
                        unicode_errors=UNICODE_ERRORS,
                    )
                except Exception:  # noqa: BLE001 - msgpack raises many types for bad input
                    raise FrameError(
                        "a frame that is not one msgpack message", "invalid_frame"
                    ) from None
                self._messages.append(message)
                pos = end
        del buffer[:pos]
