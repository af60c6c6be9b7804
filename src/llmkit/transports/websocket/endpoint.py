"""The WebSocket endpoint at ``/v1/ws``: many streamed OpenAI requests on one connection.

The messages are in :mod:`llmkit.protocol.websocket`; a connection's work is in
:mod:`llmkit.transports.websocket.connection`. Keys and the ``Origin`` are checked before
the upgrade is accepted: a browser cannot set ``Authorization`` on a WebSocket, so the key
may come as the subprotocol token ``llmkit.bearer.<key>``; the server selects only the
plain protocol name.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.websockets import WebSocket

from llmkit.protocol.websocket import BEARER_PREFIX, JSON_PROTOCOL, MSGPACK_PROTOCOL
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError
from llmkit.transports.http.middleware import ApiKeys, ServerLoad
from llmkit.transports.websocket.connection import Codec, Connection
from llmkit.transports.websocket.options import WebSocketOptions

__all__ = ["WebSocketEndpoint"]

# Close code (RFC 6455): try again later (too many connections).
CLOSE_TRY_AGAIN_LATER = 1013


class WebSocketEndpoint:
    """The ``/v1/ws`` handler of one app: the checks before the upgrade, then a connection."""

    def __init__(
        self,
        ctx: ServingContext,
        keys: ApiKeys,
        allowed_origins: Sequence[str] | None,
        options: WebSocketOptions,
        load: ServerLoad,
    ):
        self._ctx = ctx
        self._keys = keys
        self._origins = set(allowed_origins or ())
        self._options = options
        self._load = load
        self.connections = 0

    async def handle(self, ws: WebSocket) -> None:
        offered = list(ws.scope.get("subprotocols", []))
        refusal = self._refusal(ws, offered)
        if refusal is not None:
            await _deny(ws, refusal)
            return
        subprotocol = next((p for p in (MSGPACK_PROTOCOL, JSON_PROTOCOL) if p in offered), None)
        await ws.accept(subprotocol)
        if self.connections >= self._options.max_connections:
            await ws.close(CLOSE_TRY_AGAIN_LATER, "too many connections; try again later")
            return
        self.connections += 1
        try:
            codec = Codec(subprotocol)
            await Connection(self._ctx, ws, codec, self._options, self._load).serve()
        finally:
            self.connections -= 1

    def _refusal(self, ws: WebSocket, offered: list[str]) -> OpenAIError | None:
        origin = ws.headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, ws.headers.get("host")):
            # The origin is the page's, not a secret; it names what to configure.
            return OpenAIError(
                403, f"origin {origin} may not open a WebSocket here (see --allowed-origins)"
            )
        authorization = ws.headers.get("authorization")
        # Browsers cannot set headers on a WebSocket: they offer the key as a subprotocol.
        tokens = [p[len(BEARER_PREFIX) :] for p in offered if p.startswith(BEARER_PREFIX)]
        if self._keys and not (
            self._keys.valid_header(authorization)
            or any(self._keys.valid_token(token) for token in tokens)
        ):
            return ApiKeys.refusal(authorization or (f"Bearer {tokens[0]}" if tokens else None))
        return None

    def _origin_allowed(self, origin: str, host: str | None) -> bool:
        """A listed origin, or, with none listed, the page's own (same host and port)."""
        if self._origins:
            return "*" in self._origins or origin in self._origins
        return host is not None and urlsplit(origin).netloc == host


async def _deny(ws: WebSocket, error: OpenAIError) -> None:
    """Answer the upgrade request with an HTTP error (or a bare 403 if the server cannot)."""
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        body = error.body().model_dump_json()
        await ws.send_denial_response(
            Response(body, status_code=error.status, media_type="application/json")
        )
    else:
        await ws.close(1008, error.message)
