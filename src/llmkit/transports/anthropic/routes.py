"""Anthropic's Messages API handlers: as OpenAI's, with named events and every error of the
endpoint in Anthropic's shape."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from llmkit.protocol.anthropic import CountTokensRequest, MessagesRequest
from llmkit.serving.anthropic import messages as anthropic
from llmkit.serving.anthropic.convert import anthropic_error
from llmkit.serving.errors import OpenAIError
from llmkit.transports.http.answers import json_answer, parse_body
from llmkit.transports.http.held import Answer
from llmkit.transports.http.jobs import Jobs
from llmkit.transports.http.middleware import request_id
from llmkit.transports.http.stream import StreamStyle

_STREAM = StreamStyle(named=True, error=anthropic_error)


class AnthropicRoutes:
    """transports/anthropic/endpoints.py declares them."""

    def __init__(self, jobs: Jobs):
        self._jobs = jobs

    async def messages(self, request: Request) -> Answer:
        try:
            req = await parse_body(request, MessagesRequest)
            rid = f"msg_{request_id(request.scope)}"
            return await self._jobs.serve_job(
                request,
                req.model,
                lambda ctx: anthropic.prepare_message(ctx, req, rid),
                anthropic.stream_message,
                anthropic.create_message,
                _STREAM,
            )
        except OpenAIError as exc:
            return _error(exc)

    async def count_tokens(self, request: Request) -> Response:
        try:
            req = await parse_body(request, CountTokensRequest)
            return json_answer(await anthropic.count_tokens(self._jobs.ctx, req))
        except OpenAIError as exc:
            return _error(exc)


def _error(exc: OpenAIError) -> Response:
    response = json_answer(anthropic_error(exc), exc.status)
    response.headers.update(exc.headers)
    return response
