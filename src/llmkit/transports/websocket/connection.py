"""One WebSocket connection of ``/v1/ws``: its messages in, its requests run, chunks out.

Each request runs the same serving function as an SSE stream, with an ``emit`` that sends
a ``chunk`` message. Sends on a connection take turns, and a request's task reads its next
engine output only once its last chunk is written, so a slow client holds at most one
message per request here while the engine stream coalesces the rest into the next chunk:
no queue grows per connection.

When the server's ``Closing`` signal is set, each request still running ends with the
shutdown error and its ``done`` (status ``failed``); each counts in the server's load
until its ``done`` is sent, so that a draining server waits for it as for an HTTP request.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import msgpack
from pydantic import BaseModel, ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from llmkit.manager.lease import Lease
from llmkit.protocol.messages import Message, ProtocolError
from llmkit.protocol.openai import ChatCompletionRequest, CompletionRequest
from llmkit.protocol.openai.responses import ResponsesRequest
from llmkit.protocol.text import UNICODE_ERRORS, unencodable_message, unencodable_path
from llmkit.protocol.websocket import (
    MSGPACK_PROTOCOL,
    Cancel,
    Create,
    DoneStatus,
    chunk_message,
    done_message,
    openai_error_message,
    parse_message,
    protocol_error,
)
from llmkit.serving import media
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError, bad_request, from_engine_error, from_validation_error
from llmkit.serving.openai import chat, completions, responses, responses_stream
from llmkit.serving.openai.chat import ChatJob
from llmkit.serving.openai.completions import CompletionJob
from llmkit.serving.openai.models import hold_model
from llmkit.serving.openai.responses import ResponsesJob
from llmkit.serving.shutdown import shutting_down
from llmkit.serving.stream import Emit
from llmkit.transports.http.middleware import ServerLoad
from llmkit.transports.websocket.options import WebSocketOptions

logger = logging.getLogger(__name__)

# Close code (RFC 6455): the message was too big.
CLOSE_TOO_BIG = 1009

Frame = str | bytes


class Codec:
    """Messages as JSON text frames, or msgpack binary frames with ``llmkit.msgpack``."""

    def __init__(self, subprotocol: str | None):
        self.binary = subprotocol == MSGPACK_PROTOCOL

    def decode(self, frame: Frame) -> object:
        if isinstance(frame, str):
            try:
                return json.loads(frame)
            except ValueError as exc:
                raise ProtocolError(
                    f"the message is not valid JSON: {exc}", None, "invalid_json"
                ) from None
        if not self.binary:
            raise ProtocolError(
                f"binary frames need the {MSGPACK_PROTOCOL} subprotocol; send JSON as text",
                None,
                "invalid_frame",
            )
        try:
            # Invalid UTF-8 in a string: surrogates, refused in that request alone.
            return msgpack.unpackb(frame, raw=False, unicode_errors=UNICODE_ERRORS)
        except ValueError as exc:
            raise ProtocolError(
                f"the message is not valid msgpack: {exc}", None, "invalid_msgpack"
            ) from None

    def encode(self, message: Message) -> Frame:
        if self.binary:
            return msgpack.packb(message, use_bin_type=True)
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False)

    def encode_chunk(self, rid: str, chunk: BaseModel) -> Frame:
        if self.binary:
            return self.encode(chunk_message(rid, chunk.model_dump(mode="json")))
        # The chunk is serialized once, as the SSE stream does, and spliced in.
        return f'{{"type":"chunk","id":{json.dumps(rid)},"data":{chunk.model_dump_json()}}}'


@dataclass
class _Request:
    job: ChatJob | CompletionJob | ResponsesJob
    ctx: ServingContext  # of the model it names, held by ``lease`` among several
    lease: Lease | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    stopped: bool = False  # by the server's shutdown, not by the client


class Connection:
    """One client: its messages read in order, each request streamed by a task of its own."""

    def __init__(
        self,
        ctx: ServingContext,
        ws: WebSocket,
        codec: Codec,
        options: WebSocketOptions,
        load: ServerLoad,
    ):
        self._ctx = ctx
        self._ws = ws
        self._codec = codec
        self._options = options
        self._load = load
        self._requests: dict[str, _Request] = {}
        self._sending = anyio.Lock()

    async def serve(self) -> None:
        """Until the client leaves, idles out or breaks a limit; its requests are aborted."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._stop_at_shutdown)
            try:
                await self._read()
            finally:
                tg.cancel_scope.cancel()

    async def _stop_at_shutdown(self) -> None:
        await self._ctx.closing.wait()
        for request in self._requests.values():
            request.stopped = True
            request.scope.cancel()

    async def _read(self) -> None:
        while True:
            with anyio.move_on_after(self._options.idle_timeout_s) as idle:
                message = await self._ws.receive()
            if idle.cancelled_caught:
                if self._requests:
                    continue
                await self._close(1000, "idle timeout")
                return
            if message["type"] == "websocket.disconnect":
                return
            frame: Frame = message["text"] if message.get("text") is not None else message["bytes"]
            size = len(frame.encode() if isinstance(frame, str) else frame)
            if size > self._options.max_message_bytes:
                await self._close(
                    CLOSE_TOO_BIG, f"message over {self._options.max_message_bytes} bytes"
                )
                return
            await self._handle(frame)

    async def _handle(self, frame: Frame) -> None:
        """Act on one message; one that cannot be served gets an error, the connection stays."""
        try:
            message = parse_message(self._codec.decode(frame))
            if isinstance(message, Cancel):
                self._cancel(message.id)
            else:
                await self._create(message)
        except ProtocolError as exc:
            await self._send(self._codec.encode(protocol_error(exc)))

    def _cancel(self, rid: str) -> None:
        request = self._requests.get(rid)
        if request is None:
            raise ProtocolError(
                f"no request with id {rid!r} is in flight on this connection",
                "id",
                "unknown_request",
            )
        request.scope.cancel()

    async def _create(self, message: Create) -> None:
        rid = message.id
        if rid in self._requests:
            raise ProtocolError(
                f"id {rid!r} is already in flight on this connection", "id", "duplicate_id"
            )
        cap = self._options.max_requests_per_connection
        try:
            if len(self._requests) >= cap:
                raise OpenAIError(
                    429,
                    f"this connection already has {cap} requests in flight; wait for one to "
                    "finish or open another connection",
                    None,
                    "too_many_requests",
                )
            request = await self._start(message)
        except OpenAIError as exc:
            await self._fail(rid, exc)
            return
        self._requests[rid] = request
        self._tg.start_soon(self._run, rid, request)

    async def _start(self, message: Create) -> _Request:
        """The request checked and started, as its HTTP route would with ``stream: true``."""
        body = {**message.body, "stream": True}
        if (bad := unencodable_path(message.body)) is not None:
            raise bad_request(unencodable_message(bad), bad or None, "invalid_text")
        req: ChatCompletionRequest | ResponsesRequest | CompletionRequest
        try:
            if message.kind == "chat.completions.create":
                req = ChatCompletionRequest.model_validate(body)
            elif message.kind == "responses.create":
                req = ResponsesRequest.model_validate(body)
            else:
                req = CompletionRequest.model_validate(body)
        except ValidationError as exc:
            raise from_validation_error(exc) from None
        ctx, lease = await hold_model(self._ctx, req.model)
        job: ChatJob | CompletionJob | ResponsesJob
        try:
            if isinstance(req, ChatCompletionRequest):
                images = await media.chat_images(ctx, req.messages)
                job = await chat.prepare_chat(ctx, req, f"chatcmpl-{uuid.uuid4().hex}", images)
            elif isinstance(req, ResponsesRequest):
                job = await responses.prepare_response(ctx, req, f"resp_{uuid.uuid4().hex}")
            else:
                job = await completions.prepare_completion(ctx, req, f"cmpl-{uuid.uuid4().hex}")
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        return _Request(job, ctx, lease)

    async def _produce(self, request: _Request, emit: Emit) -> None:
        job, ctx = request.job, request.ctx
        if isinstance(job, ResponsesJob):
            await responses_stream.stream_response(ctx, job, emit)
        elif isinstance(job, ChatJob):
            await chat.stream_chat(ctx, job, emit)
        else:
            await completions.stream_completion(ctx, job, emit)

    async def _run(self, rid: str, request: _Request) -> None:
        # Counted here, where the count surely drops again (a task may be cancelled unstarted).
        self._load.in_flight += 1
        try:
            status = await self._stream(rid, request)
            del self._requests[rid]
            await self._send(self._codec.encode(done_message(rid, status)))
        finally:
            self._load.in_flight -= 1
            if request.lease is not None:
                request.lease.release()

    async def _stream(self, rid: str, request: _Request) -> DoneStatus:
        """Stream the request's chunks, and an error if it fails; how it ended."""
        status: DoneStatus = "finished"

        async def emit(chunk: BaseModel) -> None:
            await self._send(self._codec.encode_chunk(rid, chunk))

        with request.scope:
            try:
                await self._produce(request, emit)
            except OpenAIError as exc:
                status = "failed"
                await self._send_error(rid, exc)
            except Exception as exc:
                logger.exception("a WebSocket request failed")
                status = "failed"
                await self._send_error(rid, from_engine_error(exc))
            finally:
                for stream in request.job.streams:
                    stream.close()
        if request.scope.cancelled_caught and request.stopped:
            await self._send_error(rid, shutting_down())
            return "failed"
        return "cancelled" if request.scope.cancelled_caught else status

    async def _fail(self, rid: str, error: OpenAIError) -> None:
        await self._send_error(rid, error)
        await self._send(self._codec.encode(done_message(rid, "failed")))

    async def _send_error(self, rid: str, error: OpenAIError) -> None:
        body: dict[str, Any] = error.body().error.model_dump()
        if error.retry_after_s is not None:  # as the unix socket sends it
            body["retry_after_ms"] = round(error.retry_after_s * 1000)
        await self._send(self._codec.encode(openai_error_message(rid, body)))

    async def _send(self, frame: Frame) -> None:
        """Send one message, after those before it; a client that is gone ends the connection."""
        async with self._sending:
            try:
                if isinstance(frame, str):
                    await self._ws.send_text(frame)
                else:
                    await self._ws.send_bytes(frame)
            except (WebSocketDisconnect, OSError, RuntimeError):
                self._tg.cancel_scope.cancel()
                await anyio.lowlevel.checkpoint()

    async def _close(self, code: int, reason: str) -> None:
        async with self._sending:
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                await self._ws.close(code, reason)
