"""The request body's bounds: a size limit (413) and a time limit for reading it (408).

Pure ASGI, around everything that reads a body: a body declared too large is refused
before a byte of it is read; one that grows past the limit, or that takes longer than the
timeout to arrive (a client that sends headers and then one byte), fails the read with an
:class:`OpenAIError` that the app's error handler answers.
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llmkit.serving.errors import OpenAIError
from llmkit.transports.http.middleware import header, send_error

# 16 MiB: a long prompt is a few MB; several images in a chat request fit many times over.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_BODY_TIMEOUT_S = 30.0
# A refused body is read and thrown away up to this many bytes, so that the client, still
# sending, gets to read the 413 (a server that closes mid-upload shows it a broken pipe).
_DRAIN_BYTES = 256 * 1024 * 1024


class RequestBodyLimitMiddleware:
    """Refuses bodies over ``max_bytes`` (413) and bodies not read within ``timeout_s`` of
    the request's start (408); either limit is off when None."""

    def __init__(self, app: ASGIApp, max_bytes: int | None, timeout_s: float | None):
        self.app = app
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = None if self._timeout_s is None else anyio.current_time() + self._timeout_s
        declared = _content_length(scope)
        if self._max_bytes is not None and declared is not None and declared > self._max_bytes:
            await _drain(receive, deadline)
            await send_error(send, self._too_large())
            return
        received = 0
        complete = False

        async def bounded_receive() -> Message:
            nonlocal received, complete
            if complete:  # what comes after the body (a disconnect) may take any time
                return await receive()
            message = await _before(receive, deadline, self._timeout_s)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if self._max_bytes is not None and received > self._max_bytes:
                    raise self._too_large()
            return message

        await self.app(scope, bounded_receive, send)

    def _too_large(self) -> OpenAIError:
        return OpenAIError(
            413,
            f"the request body is larger than this server's limit of {self._max_bytes} bytes "
            "(--max-request-body-bytes)",
            None,
            "request_too_large",
        )


async def _before(receive: Receive, deadline: float | None, timeout_s: float | None) -> Message:
    """The next message, or a 408 if the body's time is up first."""
    if deadline is None:
        return await receive()
    with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
        return await receive()
    raise OpenAIError(
        408,
        f"the request body did not arrive within {timeout_s:g} s (--request-body-timeout-s)",
        None,
        "request_timeout",
    )


async def _drain(receive: Receive, deadline: float | None) -> None:
    """Read and drop the body (up to _DRAIN_BYTES, until the deadline), keeping none of it."""
    drained = 0
    with anyio.move_on_after(
        None if deadline is None else max(0.0, deadline - anyio.current_time())
    ):
        while drained < _DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def _content_length(scope: Scope) -> int | None:
    value = header(scope, b"content-length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value)
