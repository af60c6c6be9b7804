"""Middleware that `llmkit serve --middleware` imports by path in the tests (not a test module)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ServedBy:
    """A pure ASGI middleware class: adds ``x-served-by`` to every response."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", ()), (b"x-served-by", b"llmkit-test")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_header)


async def stamp(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """A dispatch function, as FastAPI's ``@app.middleware("http")`` takes."""
    response = await call_next(request)
    response.headers["x-stamp"] = "1"
    return response
