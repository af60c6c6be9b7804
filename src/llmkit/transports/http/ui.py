"""The chat page's routes: ``/`` and every script, style and icon of the package's ``ui/``
folder under ``/ui/`` (the page, the browser client module, the vendored libraries).

The page holds no secrets, so it loads without an API key and asks for one itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from importlib import resources
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:  # importlib.abc's name for it on Python 3.10
    from importlib.abc import Traversable

# What the page's folder serves, by suffix; READMEs and licenses stay package data only.
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

# Only the page's own files run; the WebSocket may use ws: or wss: (older browsers do not
# count them as 'self').
_HEADERS = {
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'"
    ),
}


def _folder() -> Traversable:
    return resources.files("llmkit.transports").joinpath("ui")


def _files(folder: Traversable, prefix: str = "/ui/") -> Iterator[tuple[str, Traversable]]:
    """(path in the app, file) for each servable file, subfolders included."""
    for item in folder.iterdir():
        if item.is_dir():
            yield from _files(item, f"{prefix}{item.name}/")
        elif any(item.name.endswith(suffix) for suffix in _MEDIA_TYPES):
            yield prefix + item.name, item


def _page_paths() -> frozenset[str]:
    # The icon answers /favicon.ico too, for browsers that ask before reading the page.
    return frozenset({"/", "/favicon.ico", *(path for path, _ in _files(_folder()))})


PAGE_PATHS = _page_paths()


def ui_routes() -> list[Route]:
    """One GET route per page file; the files are read once, here."""
    folder = _folder()
    routes = [Route("/", _serve(folder.joinpath("index.html")), methods=["GET"])]
    routes.append(Route("/favicon.ico", _serve(folder.joinpath("icon.svg")), methods=["GET"]))
    routes += [Route(path, _serve(item), methods=["GET"]) for path, item in _files(folder)]
    return routes


def _serve(item: Traversable) -> Callable[[Request], Awaitable[Response]]:
    body = item.read_bytes()
    media_type = next(t for s, t in _MEDIA_TYPES.items() if item.name.endswith(s))

    async def endpoint(request: Request) -> Response:
        return Response(body, media_type=media_type, headers=_HEADERS)

    return endpoint
