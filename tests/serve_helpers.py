"""Shared by the serve tests: middleware the server imports by path, a chat template, an ASGI
app run on a free port in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
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


# Shows how content reaches it: a string as S[...], a list of parts as P[...] each.
PARTS_TEMPLATE = (
    "{%- for m in messages -%}{{ m['role'] }}:"
    "{%- if m['content'] is string %} S[{{ m['content'] }}]"
    "{%- else %}{% for part in m['content'] %} P[{{ part['text'] }}]{% endfor %}{% endif %}"
    "{{ '\\n' }}"
    "{% endfor -%}{%- if add_generation_prompt %}assistant:{% endif -%}"
)
# The same, reading content without looping over it.
STRING_TEMPLATE = (
    "{%- for m in messages -%}{{ m['role'] }}: S[{{ m['content'] }}]{{ '\\n' }}{% endfor -%}"
)
PARTS_MESSAGE = {
    "role": "user",
    "content": [{"type": "text", "text": "red"}, {"type": "text", "text": "blue"}],
}


def template_file(directory: Path) -> str:
    path = directory / "parts.jinja"
    path.write_text(PARTS_TEMPLATE)
    return str(path)


def rendered(http: httpx.Client, messages: list[dict], **fields: object) -> str:
    """The prompt the server renders for ``messages``, through /tokenize and /detokenize."""
    body = {"messages": messages, "add_generation_prompt": False, **fields}
    tokens = http.post("/tokenize", json=body).raise_for_status().json()["tokens"]
    return http.post("/detokenize", json={"tokens": tokens}).raise_for_status().json()["prompt"]


def metric_samples(text: str) -> dict[str, float]:
    """A Prometheus text page as ``{"name{labels}": value}``."""
    return {
        name: float(value)
        for name, value in (
            line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#")
        )
    }


def metric(text: str, name: str) -> float:
    """The sum of the samples of ``name`` (all its label sets, or the one ``name`` spells)."""
    return sum(
        value
        for sample, value in metric_samples(text).items()
        if sample == name or sample.startswith(name + "{")
    )


@contextlib.contextmanager
def running(app: Starlette) -> Iterator[str]:
    """``app`` under uvicorn on a free 127.0.0.1 port, in a thread: its URL. The socket
    listens before the server starts, so a client may connect at once."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
