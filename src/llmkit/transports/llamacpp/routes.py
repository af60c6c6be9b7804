"""llama-server's /infill handler: parse, hand it to serving/, answer in its shape (with
``stream``, ``data:`` events, the last with ``stop: true``)."""

from __future__ import annotations

from starlette.requests import Request

from llmkit.protocol.llamacpp import InfillRequest
from llmkit.serving.llamacpp import infill
from llmkit.transports.http.answers import parse_body
from llmkit.transports.http.held import Answer
from llmkit.transports.http.jobs import Jobs
from llmkit.transports.http.middleware import request_id
from llmkit.transports.http.stream import StreamStyle

_INFILL_STREAM = StreamStyle(done=False)


class LlamaCppRoutes:
    def __init__(self, jobs: Jobs):
        self._jobs = jobs

    async def infill(self, request: Request) -> Answer:
        req = await parse_body(request, InfillRequest)
        rid = f"cmpl-{request_id(request.scope)}"
        return await self._jobs.serve_job(
            request,
            req.model,
            lambda ctx: infill.prepare_infill(ctx, req, rid),
            infill.stream_infill,
            infill.create_infill,
            _INFILL_STREAM,
        )
