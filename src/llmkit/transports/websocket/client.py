"""WebSocketClient: streamed chat and text completions over one ``/v1/ws`` connection.

::

    async with WebSocketClient("ws://127.0.0.1:8000/v1/ws", api_key="...") as client:
        async for chunk in client.chat(model="demo", messages=[...], max_tokens=64):
            print(chunk.choices[0].delta.content or "", end="")

Several streams run at once on the connection; leaving a stream's loop cancels its
request (at once with ``contextlib.aclosing``, else when the stream is dropped). Built on
the ``websockets`` package, so it runs on asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal, TypeVar

import msgpack
from pydantic import BaseModel
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from llmkit.errors import EngineNotStartedError, LLMKitError
from llmkit.protocol.messages import Message
from llmkit.protocol.openai import ChatCompletionChunk, CompletionChunk
from llmkit.protocol.websocket import (
    JSON_PROTOCOL,
    MSGPACK_PROTOCOL,
    cancel_message,
    create_message,
)

logger = logging.getLogger(__name__)

Chunk = TypeVar("Chunk", bound=BaseModel)


class WebSocketError(LLMKitError):
    """The server's error for a request (or the connection): OpenAI's error fields."""

    def __init__(self, error: dict[str, Any]):
        super().__init__(error.get("message", "the WebSocket request failed"))
        self.type = error.get("type")
        self.param = error.get("param")
        self.code = error.get("code")


class WebSocketClient:
    """One connection to an llmkit server's ``/v1/ws``; use ``async with``.

    ``api_key`` goes in the ``Authorization`` header; ``use_msgpack`` sends binary msgpack
    frames instead of JSON text.
    """

    def __init__(self, url: str, *, api_key: str | None = None, use_msgpack: bool = False):
        self._url = url
        self._api_key = api_key
        self._binary = use_msgpack
        self._ids = itertools.count(1)
        self._streams: dict[str, asyncio.Queue[Message | BaseException]] = {}
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> WebSocketClient:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        self._ws = await connect(
            self._url,
            additional_headers=headers,
            subprotocols=[Subprotocol(MSGPACK_PROTOCOL if self._binary else JSON_PROTOCOL)],
            max_size=None,
        )
        self._reader = asyncio.create_task(self._read(self._ws))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection; the server aborts the requests still in flight."""
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await self._reader

    def chat(self, **body: Any) -> AsyncIterator[ChatCompletionChunk]:
        """A streamed chat completion: ``body`` is /v1/chat/completions' request body."""
        return self._stream("chat.completions.create", body, ChatCompletionChunk)

    def completions(self, **body: Any) -> AsyncIterator[CompletionChunk]:
        """A streamed text completion: ``body`` is /v1/completions' request body."""
        return self._stream("completions.create", body, CompletionChunk)

    async def _stream(
        self,
        kind: Literal["chat.completions.create", "completions.create"],
        body: dict[str, Any],
        chunk_type: type[Chunk],
    ) -> AsyncIterator[Chunk]:
        rid = f"r{next(self._ids)}"
        queue: asyncio.Queue[Message | BaseException] = asyncio.Queue()
        self._streams[rid] = queue
        done = False
        try:
            await self._send(create_message(kind, rid, body))
            error: WebSocketError | None = None
            while True:
                message = await queue.get()
                if isinstance(message, BaseException):
                    raise message
                if message["type"] == "chunk":
                    yield chunk_type.model_validate(message["data"])
                elif message["type"] == "error":
                    error = WebSocketError(message["error"])
                elif message["type"] == "done":
                    done = True
                    if error is not None:
                        raise error
                    if message["status"] == "failed":
                        raise WebSocketError({"message": "the request failed"})
                    return
        finally:
            del self._streams[rid]
            if not done and self._ws is not None:
                # A closed connection needs none: the server aborts what it had in flight.
                with contextlib.suppress(ConnectionClosed):
                    await self._send(cancel_message(rid))

    async def _send(self, message: Message) -> None:
        if self._ws is None:
            raise EngineNotStartedError("use `async with WebSocketClient(...)` before sending")
        frame: str | bytes = (
            msgpack.packb(message, use_bin_type=True)
            if self._binary
            else json.dumps(message, separators=(",", ":"))
        )
        await self._ws.send(frame)

    async def _read(self, ws: ClientConnection) -> None:
        reason: BaseException = ConnectionError("the WebSocket connection closed")
        try:
            async for frame in ws:
                message = msgpack.unpackb(frame) if isinstance(frame, bytes) else json.loads(frame)
                queue = self._streams.get(message.get("id") or "")
                if queue is not None:
                    queue.put_nowait(message)
                elif message["type"] == "error":
                    logger.warning("WebSocket server error: %s", message["error"].get("message"))
        except ConnectionClosed as exc:
            reason = ConnectionError(f"the WebSocket connection closed: {exc}")
        for queue in self._streams.values():
            queue.put_nowait(reason)
