"""llama-server's router endpoints over a manager: ``POST /models/load`` and ``/models/unload``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from llmkit.manager.manager import ModelManager
from llmkit.protocol.openai import RouterModelRequest, RouterResponse
from llmkit.serving.context import ServingContext
from llmkit.serving.openai.models import hold_model, not_found
from llmkit.transports.http.answers import json_answer, parse_body


class ModelRoutes:
    def __init__(self, ctx: ServingContext, models: ModelManager):
        self._ctx = ctx
        self._models = models

    async def load(self, request: Request) -> Response:
        """Load now (and keep it as an idle model); a failed load is a 500 naming why."""
        req = await parse_body(request, RouterModelRequest)
        _, lease = await hold_model(self._ctx, req.model)
        assert lease is not None
        lease.release()
        return json_answer(RouterResponse())

    async def unload(self, request: Request) -> Response:
        """Unload now, or as soon as its last request ends."""
        req = await parse_body(request, RouterModelRequest)
        if req.model not in self._models.names:
            raise not_found(req.model)
        await self._models.unload(req.model)
        return json_answer(RouterResponse())
