"""The server's own handlers: probes, this document, the version, metrics and load."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

import llmkit
from llmkit.protocol.openai import ServerLoadResponse, VersionResponse
from llmkit.serving.context import ServingContext
from llmkit.serving.metrics import ServerMetrics
from llmkit.transports.http.answers import json_answer
from llmkit.transports.http.middleware import ServerLoad

# (names served, the context, the paths open without a key) -> the OpenAPI document: the app
# passes openapi/'s, which reads the endpoint table these routes are entries of.
Document = Callable[[list[str], ServingContext, frozenset[str] | None], dict[str, Any]]


class ServerRoutes:
    """transports/server/endpoints.py declares them; ``report_load``: /load counts the
    requests in flight (else it answers 0); ``document`` writes /openapi.json."""

    def __init__(
        self,
        ctx: ServingContext,
        metrics: ServerMetrics,
        load: ServerLoad,
        report_load: bool,
        document: Document,
    ):
        self.ctx = ctx
        self._document = document
        self._metrics = metrics
        self._load = load
        self._report_load = report_load
        self._openapi: tuple[list[str], bytes] | None = None
        # The paths that need no API key, for the document (None: no keys at all).
        self.open_paths: frozenset[str] | None = None

    async def livez(self, request: Request) -> Response:
        """The process answers; says nothing of the engine (that is /readyz)."""
        return Response(status_code=200)

    async def readyz(self, request: Request) -> Response:
        """200 when the model is loaded, the engine healthy and the server not draining."""
        ready = self.ctx.engine.is_healthy() and not self.ctx.draining
        return Response(status_code=200 if ready else 503)

    async def openapi(self, request: Request) -> Response:
        names = self.ctx.model_names + list(self.ctx.loras.adapters)
        if self._openapi is None or self._openapi[0] != names:  # adapters come and go
            document = self._document(names, self.ctx, self.open_paths)
            self._openapi = (names, json.dumps(document).encode())
        return Response(self._openapi[1], media_type="application/json")

    async def version(self, request: Request) -> Response:
        return json_answer(VersionResponse(version=llmkit.__version__))

    async def metrics(self, request: Request) -> Response:
        body, content_type = self._metrics.render()
        return Response(body, headers={"content-type": content_type})

    async def load(self, request: Request) -> Response:
        in_flight = self._load.in_flight if self._report_load else 0
        return json_answer(ServerLoadResponse(server_load=in_flight))
