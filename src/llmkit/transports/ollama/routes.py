"""Ollama's handlers: parse, hold the model the request names, run it through serving/ as its
OpenAI twin, and answer in Ollama's shapes (NDJSON unless ``stream`` is false)."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from llmkit.manager.keep_alive import parse_keep_alive
from llmkit.protocol.ollama import (
    ChatRequest,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EmbedRequest,
    EmbedResponse,
    GenerateRequest,
    ModelRequest,
    VersionResponse,
)
from llmkit.protocol.ollama.requests import KeepAlive
from llmkit.protocol.openai import ChatCompletionRequest, EmbeddingRequest
from llmkit.serving import media
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError, bad_request
from llmkit.serving.fim import model_fim
from llmkit.serving.ollama import api as ollama
from llmkit.serving.ollama import models as ollama_models
from llmkit.serving.ollama.api import Kind, Timer
from llmkit.serving.ollama.convert import chat_request, embed_request, generate_request
from llmkit.serving.openai import chat, completions, embeddings
from llmkit.serving.openai.models import hold_model
from llmkit.serving.tool_choice import check_tools
from llmkit.transports.http.answers import json_answer, parse_body
from llmkit.transports.http.held import Answer, HeldResponse
from llmkit.transports.http.middleware import request_id
from llmkit.transports.http.stream import EventStreamResponse, StreamStyle, run_until_disconnect
from llmkit.transports.ollama.endpoints import ollama_error

# The Ollama release whose API this follows; clients check it before using newer fields.
OLLAMA_VERSION = "0.12.6"
_NDJSON = StreamStyle(ndjson=True, error=ollama_error)
_STORE_REFUSAL = (
    "this server does not download, push, create, copy or delete models: it serves the "
    "models it was started with (llmkit serve --model NAME=PATH); /api/tags lists them"
)
Prepared = Callable[[ServingContext, Timer], Awaitable[Answer]]


def _ollama_errors(handler: Callable[..., Awaitable[Answer]]) -> Callable[..., Awaitable[Answer]]:
    """Every error in Ollama's shape, ``{"error": "..."}``, with its status."""

    @functools.wraps(handler)
    async def answer(self: OllamaRoutes, request: Request) -> Answer:
        try:
            return await handler(self, request)
        except OpenAIError as exc:
            body = ollama_error(exc)
            return Response(body.model_dump_json(), exc.status, exc.headers, "application/json")

    return answer


def _ollama_json(result: BaseModel | None) -> Response:
    if result is None:
        return json_answer(None)
    return Response(result.model_dump_json(exclude_none=True), media_type="application/json")


class OllamaRoutes:
    def __init__(self, ctx: ServingContext):
        self.ctx = ctx

    @_ollama_errors
    async def chat(self, request: Request) -> Answer:
        req = await parse_body(request, ChatRequest)
        name = ollama_models.ollama_name(self.ctx, req.model)
        check_tools(req.tools or [])  # as Ollama asks tools of the model before it loads it
        if not req.messages:  # Ollama's way to load (or, keep_alive 0, unload) a model
            return await self._load_only("chat", name, req.keep_alive)
        converted = chat_request(req, name, self.ctx.options.enable_auto_tool_choice)
        answer = partial(self._chat, request, converted, "chat")
        return await self._serve(name, req.keep_alive, answer)

    @_ollama_errors
    async def generate(self, request: Request) -> Answer:
        req = await parse_body(request, GenerateRequest)
        name = ollama_models.ollama_name(self.ctx, req.model)
        if not req.prompt and not req.images:
            # A suffix asks for a model that can insert, before Ollama loads it.
            insert = bool(req.suffix)
            return await self._load_only("generate", name, req.keep_alive, insert)
        converted = generate_request(req, name)
        if isinstance(converted, ChatCompletionRequest):
            answer = partial(self._chat, request, converted, "generate")
        else:
            answer = partial(self._raw, request, converted)
        return await self._serve(name, req.keep_alive, answer)

    async def _chat(
        self, request: Request, req: ChatCompletionRequest, kind: Kind, ctx: ServingContext,
        timer: Timer,
    ) -> Answer:  # fmt: skip
        rid = f"chatcmpl-{request_id(request.scope)}"
        job = await chat.prepare_chat(ctx, req, rid, await media.chat_images(ctx, req.messages))
        return await self._answer(request, ctx, req.stream, job, chat, kind, timer)

    async def _raw(self, request: Request, req: Any, ctx: ServingContext, timer: Timer) -> Answer:
        job = await completions.prepare_completion(ctx, req, f"cmpl-{request_id(request.scope)}")
        return await self._answer(request, ctx, req.stream, job, completions, "generate", timer)

    async def _answer(
        self, request: Request, ctx: ServingContext, stream: bool, job: Any, api: Any,
        kind: Kind, timer: Timer,
    ) -> Answer:  # fmt: skip
        """``api``: serving/'s chat or completions module, whose answers are converted."""
        run_stream = api.stream_chat if api is chat else api.stream_completion
        create = api.create_chat if api is chat else api.create_completion
        if stream:
            produce = partial(ollama.stream, ctx, job, run_stream, kind, timer)
            return EventStreamResponse(produce, closing=ctx.closing, style=_NDJSON)
        work = partial(ollama.create, ctx, job, create, kind, timer)
        return _ollama_json(await run_until_disconnect(request.receive, work, ctx.closing))

    @_ollama_errors
    async def embed(self, request: Request) -> Answer:
        req = await parse_body(request, EmbedRequest)
        name = ollama_models.ollama_name(self.ctx, req.model)
        converted = embed_request(req, name)

        async def answer(ctx: ServingContext, timer: Timer) -> Answer:
            result = await self._embed(request, ctx, converted)
            if result is None:
                return json_answer(None)
            vectors = [list(d.embedding) for d in result.data]
            timings = timer.timings(None, result.usage)
            return _ollama_json(
                EmbedResponse(
                    model=name,
                    embeddings=vectors,
                    total_duration=timings["total_duration"],
                    load_duration=timings["load_duration"],
                    prompt_eval_count=timings["prompt_eval_count"],
                )
            )

        return await self._serve(name, req.keep_alive, answer)

    @_ollama_errors
    async def embeddings(self, request: Request) -> Answer:
        req = await parse_body(request, EmbeddingsRequest)
        name = ollama_models.ollama_name(self.ctx, req.model)
        converted = EmbeddingRequest(model=name, input=req.prompt)

        async def answer(ctx: ServingContext, timer: Timer) -> Answer:
            result = await self._embed(request, ctx, converted)
            if result is None:
                return json_answer(None)
            return _ollama_json(EmbeddingsResponse(embedding=result.data[0].embedding))

        return await self._serve(name, req.keep_alive, answer)

    async def _embed(self, request: Request, ctx: ServingContext, req: EmbeddingRequest) -> Any:
        job = await embeddings.prepare_embedding(ctx, req, f"embd-{request_id(request.scope)}")
        work = partial(embeddings.create_embedding, ctx, job)
        return await run_until_disconnect(request.receive, work, ctx.closing)

    async def _serve(self, name: str, keep_alive: KeepAlive, answer: Prepared) -> Answer:
        """``answer`` with the model held (loaded first) until it has been sent."""
        ctx, lease = await hold_model(self.ctx, name, keep_alive)
        if lease is None:
            return await answer(ctx, Timer())
        try:
            return HeldResponse(await answer(ctx, Timer(load_s=lease.waited_s)), lease)
        except BaseException:
            lease.release()
            raise

    async def _load_only(
        self, kind: Kind, name: str, keep_alive: KeepAlive, insert: bool = False
    ) -> Answer:
        """Ollama's empty request: load the model, or with keep_alive 0 unload it;
        ``insert``: a 400 (naming ``suffix``) unless the model can fill in the middle."""
        timer = Timer()
        models = self.ctx.models
        try:
            unload = keep_alive is not None and parse_keep_alive(keep_alive) == 0
        except ValueError as exc:
            raise bad_request(str(exc), "keep_alive") from None
        if unload and models is not None:
            await models.unload(name)
        else:
            ctx, lease = await hold_model(self.ctx, name, keep_alive)
            if lease is not None:
                timer.load_s = lease.waited_s
                lease.release()
            if insert:
                model_fim(ctx, "suffix")
        reason = "unload" if unload else "load"
        done = ollama.answer(kind, name, "", None, [], done=True)
        return _ollama_json(done.model_copy(update={"done_reason": reason}))

    @_ollama_errors
    async def tags(self, request: Request) -> Answer:
        return _ollama_json(ollama_models.list_tags(self.ctx))

    @_ollama_errors
    async def show(self, request: Request) -> Answer:
        req = await parse_body(request, ModelRequest)
        return _ollama_json(ollama_models.show(self.ctx, req.model))

    @_ollama_errors
    async def ps(self, request: Request) -> Answer:
        return _ollama_json(ollama_models.ps(self.ctx, time.time()))

    @_ollama_errors
    async def version(self, request: Request) -> Answer:
        return _ollama_json(VersionResponse(version=OLLAMA_VERSION))

    @_ollama_errors
    async def unsupported(self, request: Request) -> Answer:
        raise OpenAIError(403, _STORE_REFUSAL)
