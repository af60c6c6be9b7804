"""The HTTP app's endpoints and how it answers: parse the body, hand it to serving/, reply
with JSON or a stream, and turn every error into OpenAI's error shape."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

import llmkit
from llmkit.protocol.anthropic import CountTokensRequest, MessagesRequest
from llmkit.protocol.openai import (
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    EmbeddingRequest,
    LoadLoRAAdapterRequest,
    RerankRequest,
    ScoreRequest,
    TokenizeRequest,
    UnloadLoRAAdapterRequest,
    VersionResponse,
)
from llmkit.protocol.openai.responses import ResponsesRequest
from llmkit.serving import (
    anthropic,
    chat,
    completions,
    embeddings,
    media,
    responses,
    responses_stream,
    score,
    tokens,
)
from llmkit.serving.anthropic_convert import anthropic_error
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError
from llmkit.serving.metrics import ServerMetrics
from llmkit.serving.models import hold_model
from llmkit.serving.stream import Emit
from llmkit.transports.http_answers import json_answer, parse_body
from llmkit.transports.http_held import Answer, HeldResponse
from llmkit.transports.http_middleware import ServerLoad, request_id
from llmkit.transports.http_stream import EventStreamResponse, StreamStyle, run_until_disconnect
from llmkit.transports.openapi import openapi_document

_OPENAI_STREAM = StreamStyle()
# vLLM's, Jina's and Cohere's paths of one rerank endpoint.
RERANK_PATHS = ("/rerank", "/v1/rerank", "/v2/rerank")


class Routes:
    """The endpoints: parse, hand to serving/, answer. One serving call per endpoint."""

    def __init__(
        self,
        ctx: ServingContext,
        metrics: ServerMetrics,
        load: ServerLoad,
        report_load: bool,
        keepalive_s: float | None,
    ):
        self.ctx = ctx
        self._metrics = metrics
        self._load = load
        self._report_load = report_load
        self._keepalive_s = keepalive_s
        self._openapi: tuple[list[str], bytes] | None = None
        # The paths that need no API key, for the document (None: no keys at all).
        self.open_paths: frozenset[str] | None = None

    async def completions(self, request: Request) -> Answer:
        req = await parse_body(request, CompletionRequest)
        rid = f"cmpl-{request_id(request.scope)}"
        return await self._serve_job(
            request,
            req.model,
            lambda ctx: completions.prepare_completion(ctx, req, rid),
            completions.stream_completion,
            completions.create_completion,
        )

    async def chat_completions(self, request: Request) -> Answer:
        req = await parse_body(request, ChatCompletionRequest)
        rid = f"chatcmpl-{request_id(request.scope)}"

        async def prepare(ctx: ServingContext) -> chat.ChatJob:
            return await chat.prepare_chat(
                ctx, req, rid, await media.chat_images(ctx, req.messages)
            )

        return await self._serve_job(
            request, req.model, prepare, chat.stream_chat, chat.create_chat
        )

    async def messages(self, request: Request) -> Answer:
        try:
            req = await parse_body(request, MessagesRequest)
            rid = f"msg_{request_id(request.scope)}"
            return await self._serve_job(
                request,
                req.model,
                lambda ctx: anthropic.prepare_message(ctx, req, rid),
                anthropic.stream_message,
                anthropic.create_message,
                _ANTHROPIC_STREAM,
            )
        except OpenAIError as exc:
            return _anthropic_error(exc)

    async def responses(self, request: Request) -> Answer:
        req = await parse_body(request, ResponsesRequest)
        rid = f"resp_{request_id(request.scope)}"
        return await self._serve_job(
            request,
            req.model,
            lambda ctx: responses.prepare_response(ctx, req, rid),
            responses_stream.stream_response,
            responses.create_response,
            _RESPONSES_STREAM,
            streams=req.stream,
        )

    async def _serve_job(
        self,
        request: Request,
        model: str | None,
        prepare: Callable[[ServingContext], Awaitable[Any]],
        stream: Callable[[ServingContext, Any, Emit], Awaitable[None]],
        create: Callable[[ServingContext, Any], Awaitable[BaseModel]],
        style: StreamStyle = _OPENAI_STREAM,
        streams: bool | None = None,
    ) -> Answer:
        """A generation endpoint: ``prepare`` a job for the model, then answer with the
        events ``stream`` emits or the one answer ``create`` gives (``streams``: whether to
        stream, default the job's own ``stream``)."""

        async def answer(ctx: ServingContext) -> Answer:
            job = await prepare(ctx)
            return await self._answer(
                request,
                job.stream if streams is None else streams,
                partial(stream, ctx, job),
                partial(create, ctx, job),
                style,
            )

        return await self._serve(model, answer)

    async def _serve(
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

    async def response(self, request: Request) -> Response:
        """GET, DELETE or cancel one stored response."""
        rid = request.path_params["response_id"]
        if request.url.path.endswith("/cancel"):
            return json_answer(responses.cancel_response(self.ctx, rid))
        if request.method == "DELETE":
            return json_answer(responses.delete_response(self.ctx, rid))
        return json_answer(responses.retrieve_response(self.ctx, rid))

    async def _answer(
        self,
        request: Request,
        stream: bool,
        produce: Callable[[Emit], Awaitable[None]],
        create: Callable[[], Awaitable[BaseModel]],
        style: StreamStyle = _OPENAI_STREAM,
    ) -> Answer:
        """The events ``produce`` emits, or with ``stream`` false the one answer ``create``
        gives; either stops when the client leaves."""
        if stream:
            return EventStreamResponse(
                produce, keepalive_s=self._keepalive_s, closing=self.ctx.closing, style=style
            )
        return json_answer(await run_until_disconnect(request.receive, create, self.ctx.closing))

    async def count_tokens(self, request: Request) -> Response:
        try:
            req = await parse_body(request, CountTokensRequest)
            return json_answer(await anthropic.count_tokens(self.ctx, req))
        except OpenAIError as exc:
            return _anthropic_error(exc)

    async def embeddings(self, request: Request) -> Answer:
        req = await parse_body(request, EmbeddingRequest)
        rid = f"embd-{request_id(request.scope)}"

        async def answer(ctx: ServingContext) -> Answer:
            job = await embeddings.prepare_embedding(ctx, req, rid)
            work = partial(embeddings.create_embedding, ctx, job)
            return json_answer(await run_until_disconnect(request.receive, work, ctx.closing))

        return await self._serve(req.model, answer)

    async def score(self, request: Request) -> Answer:
        req = await parse_body(request, ScoreRequest)
        rid = f"score-{request_id(request.scope)}"

        async def answer(ctx: ServingContext) -> Answer:
            work = partial(score.create_score, ctx, req, rid)
            return json_answer(await run_until_disconnect(request.receive, work, ctx.closing))

        return await self._serve(req.model, answer)

    async def rerank(self, request: Request) -> Answer:
        req = await parse_body(request, RerankRequest)
        rid = f"rerank-{request_id(request.scope)}"

        async def answer(ctx: ServingContext) -> Answer:
            work = partial(score.create_rerank, ctx, req, rid)
            return json_answer(await run_until_disconnect(request.receive, work, ctx.closing))

        return await self._serve(req.model, answer)

    async def models(self, request: Request) -> Response:
        return json_answer(tokens.list_models(self.ctx))

    async def model(self, request: Request) -> Response:
        return json_answer(tokens.retrieve_model(self.ctx, request.path_params["model"]))

    async def load_lora_adapter(self, request: Request) -> Response:
        req = await parse_body(request, LoadLoRAAdapterRequest)
        loras = self.ctx.loras
        await loras.load(self.ctx.engine, req.lora_name, req.lora_path, self.ctx.model_names)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    async def unload_lora_adapter(self, request: Request) -> Response:
        req = await parse_body(request, UnloadLoRAAdapterRequest)
        await self.ctx.loras.unload(self.ctx.engine, req.lora_name)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' removed successfully.")

    async def tokenize(self, request: Request) -> Answer:
        req = await parse_body(request, TokenizeRequest)

        async def answer(ctx: ServingContext) -> Answer:
            return json_answer(await tokens.tokenize(ctx, req))

        return await self._serve(req.model, answer)

    async def detokenize(self, request: Request) -> Answer:
        req = await parse_body(request, DetokenizeRequest)

        async def answer(ctx: ServingContext) -> Answer:
            return json_answer(tokens.detokenize(ctx, req))

        return await self._serve(req.model, answer)

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
            document = openapi_document(names, self.ctx, self.open_paths)
            self._openapi = (names, json.dumps(document).encode())
        return Response(self._openapi[1], media_type="application/json")

    async def version(self, request: Request) -> Response:
        return json_answer(VersionResponse(version=llmkit.__version__))

    async def metrics(self, request: Request) -> Response:
        body, content_type = self._metrics.render()
        return Response(body, headers={"content-type": content_type})

    async def load(self, request: Request) -> Response:
        return JSONResponse({"server_load": self._load.in_flight if self._report_load else 0})


_ANTHROPIC_STREAM = StreamStyle(named=True, error=anthropic_error)
_RESPONSES_STREAM = StreamStyle(named=True, error=responses_stream.stream_error)


def _anthropic_error(exc: OpenAIError) -> Response:
    response = json_answer(anthropic_error(exc), exc.status)
    response.headers.update(exc.headers)
    return response
