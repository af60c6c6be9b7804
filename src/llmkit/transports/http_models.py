"""llama-server's router endpoints over a manager: ``POST /models/load`` and ``/models/unload``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llmkit.models import ModelManager
from llmkit.protocol.openai.common import RequestBody
from llmkit.serving.context import ServingContext
from llmkit.serving.models import hold_model, not_found
from llmkit.transports.http_answers import parse_body


class ModelRequest(RequestBody):
    """The model to load or unload, by the name clients use."""

    model: str


class ModelRoutes:
    def __init__(self, ctx: ServingContext, models: ModelManager):
        self._ctx = ctx
        self._models = models

    async def load(self, request: Request) -> Response:
        """Load now (and keep it as an idle model); a failed load is a 500 naming why."""
        req = await parse_body(request, ModelRequest)
        _, lease = await hold_model(self._ctx, req.model)
        assert lease is not None
        lease.release()
        return JSONResponse({"success": True})

    async def unload(self, request: Request) -> Response:
        """Unload now, or as soon as its last request ends."""
        req = await parse_body(request, ModelRequest)
        if req.model not in self._models.names:
            raise not_found(req.model)
        await self._models.unload(req.model)
        return JSONResponse({"success": True})

    def routes(self) -> list[Route]:
        return [
            Route("/models/load", self.load, methods=["POST"]),
            Route("/models/unload", self.unload, methods=["POST"]),
        ]
