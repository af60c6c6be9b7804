"""The chat page's routes: ``/`` and its script, style and icon under ``/ui/``, from
package data.

The page holds no secrets, so it loads without an API key and asks for one itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# Path inside the app -> (file in the package's ui/ folder, media type).
_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/ui/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/ui/style.css": ("style.css", "text/css; charset=utf-8"),
    # Linked from the page, so that a browser asks for no /favicon.ico.
    "/ui/icon.svg": ("icon.svg", "image/svg+xml"),
}
PAGE_PATHS = frozenset(_FILES)

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


def ui_routes() -> list[Route]:
    """One GET route per page file; the files are read once, here."""
    folder = resources.files("llmkit.transports").joinpath("ui")
    routes = []
    for path, (name, media_type) in _FILES.items():
        body = folder.joinpath(name).read_bytes()
        routes.append(Route(path, _serve(body, media_type), methods=["GET"]))
    return routes


def _serve(body: bytes, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return Response(body, media_type=media_type, headers=_HEADERS)

    return endpoint
