"""How an HTTP endpoint serves a request: on the model it names (of several: loaded, and held
until the answer has been sent), with one JSON answer or a stream of events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request

from llmkit.serving.context import ServingContext
from llmkit.serving.openai.models import hold_model
from llmkit.serving.stream import Emit
from llmkit.transports.http.answers import json_answer
from llmkit.transports.http.held import Answer, HeldResponse
from llmkit.transports.http.stream import EventStreamResponse, StreamStyle, run_until_disconnect

OPENAI_STREAM = StreamStyle()


class Jobs:
    """Serves the requests of the endpoints of ``ctx``; ``keepalive_s``: how often a stream
    sends a comment while it has nothing to send (None: never)."""

    def __init__(self, ctx: ServingContext, keepalive_s: float | None):
        self.ctx = ctx
        self._keepalive_s = keepalive_s

    async def serve_job(
        self,
        request: Request,
        model: str | None,
        prepare: Callable[[ServingContext], Awaitable[Any]],
        stream: Callable[[ServingContext, Any, Emit], Awaitable[None]],
        create: Callable[[ServingContext, Any], Awaitable[BaseModel]],
        style: StreamStyle = OPENAI_STREAM,
        streams: bool | None = None,
    ) -> Answer:
        """A generation endpoint: ``prepare`` a job for the model, then answer with the
        events ``stream`` emits or the one answer ``create`` gives (``streams``: whether to
        stream, default the job's own ``stream``)."""

        async def answer(ctx: ServingContext) -> Answer:
            job = await prepare(ctx)
            return await self.answer(
                request,
                job.stream if streams is None else streams,
                partial(stream, ctx, job),
                partial(create, ctx, job),
                style,
            )

        return await self.serve(model, answer)

    async def serve(
        self, model: str | None, answer: Callable[[ServingContext], Awaitable[Answer]]
    ) -> Answer:
        """``answer(ctx)`` with the context of the model a request names: with several
        models, that one loaded and held until its answer (streamed or not) has been sent."""
        ctx, lease = await hold_model(self.ctx, model)
        if lease is None:
            return await answer(ctx)
        try:
            return HeldResponse(await answer(ctx), lease)
        except BaseException:
            lease.release()
            raise

    async def answer(
        self,
        request: Request,
        stream: bool,
        produce: Callable[[Emit], Awaitable[None]],
        create: Callable[[], Awaitable[BaseModel]],
        style: StreamStyle = OPENAI_STREAM,
    ) -> Answer:
        """The events ``produce`` emits, or with ``stream`` false the one answer ``create``
        gives; either stops when the client leaves."""
        if stream:
            return EventStreamResponse(
                produce, keepalive_s=self._keepalive_s, closing=self.ctx.closing, style=style
            )
        return json_answer(await run_until_disconnect(request.receive, create, self.ctx.closing))
