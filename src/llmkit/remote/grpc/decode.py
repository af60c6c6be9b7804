"""Requests parsed inside the call, so that bytes protobuf cannot parse (a string field that
is not UTF-8, a truncated field) fail that call with INVALID_ARGUMENT; grpc's own parse
answers such a call UNKNOWN, which a gateway takes for a server fault."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError


class ParseInCall(grpc.aio.ServerInterceptor):
    """Each unary-request method gets the raw bytes and parses them itself."""

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: Any
    ) -> Any:
        handler = await continuation(details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        parse = handler.request_deserializer
        if handler.response_streaming:
            behavior = handler.unary_stream

            async def stream(raw: bytes, context: Any) -> AsyncIterator[Any]:
                async for response in behavior(await _parsed(parse, raw, context), context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(stream, None, handler.response_serializer)
        unary = handler.unary_unary

        async def call(raw: bytes, context: Any) -> Any:
            return await unary(await _parsed(parse, raw, context), context)

        return grpc.unary_unary_rpc_method_handler(call, None, handler.response_serializer)


async def _parsed(parse: Callable[[bytes], Any], raw: bytes, context: Any) -> Any:
    try:
        return parse(raw)
    except DecodeError as exc:  # upb's words name the message type and the fault, not bytes
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request cannot be read: {exc}")
