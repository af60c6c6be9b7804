"""Pure ASGI middleware for the HTTP app: request ids with an access log, API keys, load.

Pure ASGI (not BaseHTTPMiddleware) so that streamed responses and the ``receive``
channel, where client disconnects show up, pass through untouched.
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections.abc import Callable

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llmkit.serving.errors import OpenAIError
from llmkit.transports.endpoints import ErrorShape

access_logger = logging.getLogger("llmkit.http.access")

_MAX_REQUEST_ID_LEN = 128
# Status for a request whose client left before the answer (nginx's convention).
CLIENT_CLOSED = 499


def route_path(scope: Scope) -> str:
    """The path inside this app, whether it runs at the root or mounted under a prefix."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def send_error(
    send: Send, error: OpenAIError, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer with ``error`` in OpenAI's shape, from middleware (before any app ran)."""
    body = error.body().model_dump_json().encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *[(k.encode(), v.encode()) for k, v in error.headers.items()],
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def request_id(scope: Scope) -> str:
    """The id RequestContextMiddleware gave this request."""
    return scope["state"]["request_id"]


class RequestContextMiddleware:
    """Echoes X-Request-Id (or makes one up) and logs each request, without its body.

    A request whose client left before the whole answer was sent is logged with status
    499, as nginx logs it. ``access_log=False`` keeps the ids and drops the log lines.
    """

    def __init__(self, app: ASGIApp, access_log: bool = True):
        self.app = app
        self._access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = header(scope, b"x-request-id")
        if not rid or len(rid) > _MAX_REQUEST_ID_LEN or not rid.isprintable():
            rid = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        start = time.perf_counter()
        status = 0
        # Whether the client left (the app saw http.disconnect, or a send failed), and
        # whether the whole answer was sent before it did.
        left = answered = False

        async def receive_noting_disconnect() -> Message:
            nonlocal left
            message = await receive()
            left |= message["type"] == "http.disconnect"
            return message

        async def send_with_id(message: Message) -> None:
            nonlocal status, left, answered
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", ()),
                        (b"x-request-id", rid.encode("latin-1")),
                    ],
                }
            try:
                await send(message)
            except OSError:
                left = True
                raise
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = not left

        try:
            await self.app(scope, receive_noting_disconnect, send_with_id)
        except ClientDisconnect:
            left = True  # while its body was being read: there is nobody to answer
        finally:
            if self._access_log:
                access_logger.info(
                    "%s %s %d %.1fms request_id=%s",
                    scope["method"],
                    scope["path"],
                    CLIENT_CLOSED if left and not answered else status,
                    (time.perf_counter() - start) * 1e3,
                    rid,
                )


class ApiKeys:
    """The server's API keys, compared in constant time."""

    def __init__(self, keys: list[str]):
        self._keys = [k.encode() for k in keys]

    def __bool__(self) -> bool:
        return bool(self._keys)

    def valid_token(self, token: str) -> bool:
        # Compare with every key, so timing tells nothing about which one nearly matched.
        matched = False
        for key in self._keys:
            matched |= hmac.compare_digest(token.encode(), key)
        return matched

    def valid_header(self, value: str | None) -> bool:
        """Whether an ``Authorization: Bearer <key>`` header holds a key."""
        token = _bearer_token(value)
        return token is not None and self.valid_token(token)

    @staticmethod
    def refusal(authorization: str | None) -> OpenAIError:
        """The 401 for a request whose ``Authorization`` header holds no valid key, in
        OpenAI's words: clients (LiteLLM among them) tell a bad key from a bad request by
        the message "Incorrect API key provided"."""
        token = _bearer_token(authorization)
        if not token:
            message = (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
            return OpenAIError(401, message, None, "invalid_api_key")
        return OpenAIError(
            401, f"Incorrect API key provided: {_masked(token)}.", None, "invalid_api_key"
        )


def _bearer_token(value: str | None) -> str | None:
    if value is None or value[:7].lower() != "bearer ":
        return None
    return value[7:].strip()


def _masked(token: str) -> str:
    """The key's first and last two characters, as OpenAI echoes a wrong key."""
    return token[:2] + "***" + token[-2:] if len(token) > 4 else "***"


class ApiKeyMiddleware:
    """Requires ``Authorization: Bearer <key>`` on every path but the open ones.

    WebSocket scopes pass: the WebSocket endpoint checks keys before it accepts, as
    browsers send them as a subprotocol token.
    """

    def __init__(
        self,
        app: ASGIApp,
        keys: ApiKeys,
        open_paths: frozenset[str],
        error_shape: Callable[[str], ErrorShape | None],
    ):
        self.app = app
        self._keys = keys
        self._open = open_paths
        self._shape = error_shape  # a path's API's own error shape (None: OpenAI's)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] == "OPTIONS"  # CORS preflights carry no credentials
            or route_path(scope) in self._open
            or self._keys.valid_header(header(scope, b"authorization"))
            # Anthropic's clients send the key as x-api-key.
            or self._keys.valid_token(header(scope, b"x-api-key") or "\0")
        ):
            await self.app(scope, receive, send)
            return
        error = ApiKeys.refusal(header(scope, b"authorization"))
        shape = self._shape(route_path(scope))
        body = (shape(error) if shape else error.body()).model_dump_json().encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class ServerLoad:
    """The number of requests in flight, as ``GET /load`` reports it to load balancers."""

    def __init__(self) -> None:
        self.in_flight = 0


class LoadTrackingMiddleware:
    """Counts each POST request (the model work) from its arrival to its last byte.

    The count drops when the app returns: after a stream's last event, or when a client
    disconnect has cancelled the work.
    """

    def __init__(self, app: ASGIApp, load: ServerLoad):
        self.app = app
        self._load = load

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        self._load.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self._load.in_flight -= 1
