"""The HTTP app's endpoints and how it answers: parse the body, hand it to serving/, reply
with JSON or a stream, and turn every error into OpenAI's error shape."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
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
from llmkit.serving.errors import OpenAIError, bad_request, from_validation_error
from llmkit.serving.metrics import ServerMetrics
from llmkit.serving.stream import Emit
from llmkit.transports.http_middleware import CLIENT_CLOSED, ServerLoad, request_id
from llmkit.transports.http_stream import EventStreamResponse, StreamStyle, run_until_disconnect
from llmkit.transports.openapi import openapi_document

M = TypeVar("M", bound=BaseModel)
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

    async def completions(self, request: Request) -> Response | EventStreamResponse:
        req = await _parse(request, CompletionRequest)
        rid = f"cmpl-{request_id(request.scope)}"
        job = await completions.prepare_completion(self.ctx, req, rid)
        return await self._answer(
            request,
            job.stream,
            partial(completions.stream_completion, self.ctx, job),
            partial(completions.create_completion, self.ctx, job),
        )

    async def chat_completions(self, request: Request) -> Response | EventStreamResponse:
        req = await _parse(request, ChatCompletionRequest)
        images = await media.chat_images(self.ctx, req.messages)
        rid = f"chatcmpl-{request_id(request.scope)}"
        job = await chat.prepare_chat(self.ctx, req, rid, images)
        return await self._answer(
            request,
            job.stream,
            partial(chat.stream_chat, self.ctx, job),
            partial(chat.create_chat, self.ctx, job),
        )

    async def messages(self, request: Request) -> Response | EventStreamResponse:
        try:
            req = await _parse(request, MessagesRequest)
            rid = f"msg_{request_id(request.scope)}"
            job = await anthropic.prepare_message(self.ctx, req, rid)
            return await self._answer(
                request,
                job.stream,
                partial(anthropic.stream_message, self.ctx, job),
                partial(anthropic.create_message, self.ctx, job),
                _ANTHROPIC_STREAM,
            )
        except OpenAIError as exc:
            return _anthropic_error(exc)

    async def responses(self, request: Request) -> Response | EventStreamResponse:
        req = await _parse(request, ResponsesRequest)
        rid = f"resp_{request_id(request.scope)}"
        job = await responses.prepare_response(self.ctx, req, rid)
        return await self._answer(
            request,
            req.stream,
            partial(responses_stream.stream_response, self.ctx, job),
            partial(responses.create_response, self.ctx, job),
            _RESPONSES_STREAM,
        )

    async def response(self, request: Request) -> Response:
        """GET, DELETE or cancel one stored response."""
        rid = request.path_params["response_id"]
        if request.url.path.endswith("/cancel"):
            return _json(responses.cancel_response(self.ctx, rid))
        if request.method == "DELETE":
            return _json(responses.delete_response(self.ctx, rid))
        return _json(responses.retrieve_response(self.ctx, rid))

    async def _answer(
        self,
        request: Request,
        stream: bool,
        produce: Callable[[Emit], Awaitable[None]],
        create: Callable[[], Awaitable[BaseModel]],
        style: StreamStyle = _OPENAI_STREAM,
    ) -> Response | EventStreamResponse:
        """The events ``produce`` emits, or with ``stream`` false the one answer ``create``
        gives; either stops when the client leaves."""
        if stream:
            return EventStreamResponse(
                produce, keepalive_s=self._keepalive_s, closing=self.ctx.closing, style=style
            )
        return _json(await run_until_disconnect(request.receive, create, self.ctx.closing))

    async def count_tokens(self, request: Request) -> Response:
        try:
            req = await _parse(request, CountTokensRequest)
            return _json(await anthropic.count_tokens(self.ctx, req))
        except OpenAIError as exc:
            return _anthropic_error(exc)

    async def embeddings(self, request: Request) -> Response:
        req = await _parse(request, EmbeddingRequest)
        rid = f"embd-{request_id(request.scope)}"
        job = await embeddings.prepare_embedding(self.ctx, req, rid)
        result = await run_until_disconnect(
            request.receive, lambda: embeddings.create_embedding(self.ctx, job), self.ctx.closing
        )
        return _json(result)

    async def score(self, request: Request) -> Response:
        req = await _parse(request, ScoreRequest)
        rid = f"score-{request_id(request.scope)}"
        work = partial(score.create_score, self.ctx, req, rid)
        return _json(await run_until_disconnect(request.receive, work, self.ctx.closing))

    async def rerank(self, request: Request) -> Response:
        req = await _parse(request, RerankRequest)
        rid = f"rerank-{request_id(request.scope)}"
        work = partial(score.create_rerank, self.ctx, req, rid)
        return _json(await run_until_disconnect(request.receive, work, self.ctx.closing))

    async def models(self, request: Request) -> Response:
        return _json(tokens.list_models(self.ctx))

    async def model(self, request: Request) -> Response:
        return _json(tokens.retrieve_model(self.ctx, request.path_params["model"]))

    async def load_lora_adapter(self, request: Request) -> Response:
        req = await _parse(request, LoadLoRAAdapterRequest)
        loras = self.ctx.loras
        await loras.load(self.ctx.engine, req.lora_name, req.lora_path, self.ctx.model_names)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    async def unload_lora_adapter(self, request: Request) -> Response:
        req = await _parse(request, UnloadLoRAAdapterRequest)
        await self.ctx.loras.unload(self.ctx.engine, req.lora_name)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' removed successfully.")

    async def tokenize(self, request: Request) -> Response:
        return _json(await tokens.tokenize(self.ctx, await _parse(request, TokenizeRequest)))

    async def detokenize(self, request: Request) -> Response:
        return _json(tokens.detokenize(self.ctx, await _parse(request, DetokenizeRequest)))

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
        return _json(VersionResponse(version=llmkit.__version__))

    async def metrics(self, request: Request) -> Response:
        body, content_type = self._metrics.render()
        return Response(body, headers={"content-type": content_type})

    async def load(self, request: Request) -> Response:
        return JSONResponse({"server_load": self._load.in_flight if self._report_load else 0})


async def _parse(request: Request, model: type[M]) -> M:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise bad_request(
            f"the request body must be JSON with Content-Type: application/json, got "
            f"{content_type or 'no Content-Type'}"
        )
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def _json(result: BaseModel | None, status: int = 200) -> Response:
    if result is None:  # the client left: the server drops this, as nobody is there
        return Response(status_code=CLIENT_CLOSED)
    return Response(result.model_dump_json(), status_code=status, media_type="application/json")


_ANTHROPIC_STREAM = StreamStyle(named=True, error=anthropic_error)
_RESPONSES_STREAM = StreamStyle(named=True, error=responses_stream.stream_error)


def _anthropic_error(exc: OpenAIError) -> Response:
    response = _json(anthropic_error(exc), exc.status)
    response.headers.update(exc.headers)
    return response


async def _openai_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OpenAIError)
    response = _json(exc.body(), exc.status)
    response.headers.update(exc.headers)
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    response = _json(OpenAIError(exc.status_code, str(exc.detail)).body(), exc.status_code)
    response.headers.update(exc.headers or {})  # a 405's Allow
    return response


async def _internal_error(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after this answer, so the server logs the traceback.
    return _json(OpenAIError(500, f"internal error: {type(exc).__name__}").body(), 500)


# Starlette's exception handlers: every error leaves in OpenAI's shape.
ERROR_HANDLERS: dict[Any, Any] = {
    OpenAIError: _openai_error,
    HTTPException: _http_error,
    Exception: _internal_error,
}
