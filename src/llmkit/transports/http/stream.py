"""Server-Sent Events as OpenAI frames them, and work that stops when the client leaves.

Both watch the ASGI ``receive`` channel for ``http.disconnect`` while the work runs, as
Starlette's StreamingResponse does, and cancel the work when it comes: cancelling the
serving call closes its engine streams, which aborts the engine requests. Both watch the
server's ``Closing`` signal too: work still running when it is set is cancelled the same
way, and the client gets the shutdown error (an error event before ``[DONE]``, or a 503).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
from anyio import CancelScope
from anyio.abc import TaskGroup
from pydantic import BaseModel
from starlette.types import Message, Receive, Scope, Send

from llmkit.serving.errors import OpenAIError, from_engine_error
from llmkit.serving.shutdown import Closing, shutting_down
from llmkit.serving.stream import Emit

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    # Proxies such as nginx would otherwise buffer the stream.
    (b"x-accel-buffering", b"no"),
]
_NDJSON_HEADERS = [(b"content-type", b"application/x-ndjson"), (b"cache-control", b"no-cache")]
_DONE = b"data: [DONE]\n\n"
_KEEPALIVE = b": keep-alive\n\n"


async def _cancel_on_disconnect(receive: Receive, scope: CancelScope) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def run_until_disconnect(
    receive: Receive, work: Callable[[], Awaitable[T]], closing: Closing | None = None
) -> T | None:
    """``await work()``, or None if the client disconnected first (the work is cancelled).

    Work still running when ``closing`` is set is cancelled, and the shutdown error raised.
    """
    results: list[T] = []
    errors: list[Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
        with CancelScope() as work_scope:
            if closing is not None:
                tg.start_soon(closing.cancel_when_set, work_scope)
            try:
                results.append(await work())
            except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group
                errors.append(exc)
        if work_scope.cancelled_caught:
            errors.append(shutting_down())
        tg.cancel_scope.cancel()
    if errors:
        raise errors[0]
    return results[0] if results else None


@dataclass(frozen=True)
class StreamStyle:
    """How a stream frames its events: OpenAI's (``data:`` lines, then ``[DONE]``), or with
    ``named`` Anthropic's (``event: <type>`` before each, no ``[DONE]``); ``error``: the
    body of the error event."""

    named: bool = False
    error: Callable[[OpenAIError], BaseModel] = OpenAIError.body
    # Ollama's: one JSON object a line (application/x-ndjson), no comments, no [DONE].
    ndjson: bool = False
    # llama-server's native endpoints (/infill): ``data:`` lines, the last one says so itself.
    done: bool = True


class EventStreamResponse:
    """An ASGI response that streams what ``produce(emit)`` emits, then ``data: [DONE]``.

    An error once streaming has begun is sent as one ``data: {"error": ...}`` event
    before ``[DONE]``, as OpenAI and vLLM do; so is the shutdown error when ``closing`` is
    set before the stream ends. While nothing has been sent for ``keepalive_s`` seconds (a
    request waiting in the queue or in a long prefill), a ``: keep-alive`` comment line
    is, so that proxies do not cut an idle connection.
    """

    def __init__(
        self,
        produce: Callable[[Emit], Awaitable[None]],
        headers: dict[str, str] | None = None,
        keepalive_s: float | None = None,
        closing: Closing | None = None,
        style: StreamStyle = StreamStyle(),
    ):
        self._produce = produce
        self._style = style
        self._keepalive_s = keepalive_s
        self._closing = closing
        self._headers = (_NDJSON_HEADERS if style.ndjson else _SSE_HEADERS) + [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self._headers})
        last_sent = anyio.current_time()

        async def send_body(body: bytes) -> None:
            nonlocal last_sent
            last_sent = anyio.current_time()
            await send({"type": "http.response.body", "body": body, "more_body": True})

        async def emit(chunk: BaseModel) -> None:
            if self._style.ndjson:
                await send_body(chunk.model_dump_json(exclude_none=True).encode() + b"\n")
                return
            event = f"event: {getattr(chunk, 'type', 'error')}\n" if self._style.named else ""
            await send_body(event.encode() + b"data: " + chunk.model_dump_json().encode() + b"\n\n")

        # Its own scope: it stops before [DONE], so it never sends after the last message.
        keepalive_scope = anyio.CancelScope()

        async def keep_alive(interval: float) -> None:
            with keepalive_scope, contextlib.suppress(OSError):
                while True:
                    await anyio.sleep(max(0.0, last_sent + interval - anyio.current_time()))
                    if anyio.current_time() - last_sent >= interval:
                        await send_body(_KEEPALIVE)

        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
            if self._keepalive_s and not self._style.ndjson:
                tg.start_soon(keep_alive, self._keepalive_s)
            # The client went away (ASGI 2.4 servers raise on send): nobody to tell.
            with contextlib.suppress(OSError):
                error = await self._run(emit, tg)
                keepalive_scope.cancel()
                if error is not None:
                    await emit(self._style.error(error))
                if self._style.done and not (self._style.named or self._style.ndjson):
                    await send({"type": "http.response.body", "body": _DONE, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()

    async def _run(self, emit: Emit, tg: TaskGroup) -> OpenAIError | None:
        """Stream the chunks; the error to end the stream with, if any."""
        with CancelScope() as work:
            if self._closing is not None:
                tg.start_soon(self._closing.cancel_when_set, work)
            try:
                await self._produce(emit)
            except OSError:
                raise
            except OpenAIError as exc:
                return exc
            except Exception as exc:  # the client must still learn that the stream failed
                logger.exception("a streamed request failed")
                return from_engine_error(exc)
        return shutting_down() if work.cancelled_caught else None
