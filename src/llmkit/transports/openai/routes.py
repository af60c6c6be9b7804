"""The OpenAI API's handlers (and vLLM's beside them): parse the body, hand it to serving/,
answer with JSON or a stream; every error leaves in OpenAI's shape (the app's handlers)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

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
)
from llmkit.protocol.openai.responses import ResponsesRequest
from llmkit.serving import media
from llmkit.serving.context import ServingContext
from llmkit.serving.openai import (
    chat,
    completions,
    embeddings,
    responses,
    responses_stream,
    score,
    tokens,
)
from llmkit.transports.http.answers import json_answer, parse_body
from llmkit.transports.http.held import Answer
from llmkit.transports.http.jobs import Jobs
from llmkit.transports.http.middleware import request_id
from llmkit.transports.http.stream import StreamStyle, run_until_disconnect

_RESPONSES_STREAM = StreamStyle(named=True, error=responses_stream.stream_error)


class OpenAIRoutes:
    """One serving call per endpoint (transports/openai/endpoints.py declares them)."""

    def __init__(self, jobs: Jobs):
        self.ctx = jobs.ctx
        self._jobs = jobs

    async def completions(self, request: Request) -> Answer:
        req = await parse_body(request, CompletionRequest)
        rid = f"cmpl-{request_id(request.scope)}"
        return await self._jobs.serve_job(
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

        return await self._jobs.serve_job(
            request, req.model, prepare, chat.stream_chat, chat.create_chat
        )

    async def responses(self, request: Request) -> Answer:
        req = await parse_body(request, ResponsesRequest)
        rid = f"resp_{request_id(request.scope)}"
        return await self._jobs.serve_job(
            request,
            req.model,
            lambda ctx: responses.prepare_response(ctx, req, rid),
            responses_stream.stream_response,
            responses.create_response,
            _RESPONSES_STREAM,
            streams=req.stream,
        )

    async def response(self, request: Request) -> Response:
        """GET, DELETE or cancel one stored response."""
        rid = request.path_params["response_id"]
        if request.url.path.endswith("/cancel"):
            return json_answer(responses.cancel_response(self.ctx, rid))
        if request.method == "DELETE":
            return json_answer(responses.delete_response(self.ctx, rid))
        return json_answer(responses.retrieve_response(self.ctx, rid))

    async def embeddings(self, request: Request) -> Answer:
        req = await parse_body(request, EmbeddingRequest)
        rid = f"embd-{request_id(request.scope)}"

        async def answer(ctx: ServingContext) -> Answer:
            job = await embeddings.prepare_embedding(ctx, req, rid)
            work = partial(embeddings.create_embedding, ctx, job)
            return json_answer(await run_until_disconnect(request.receive, work, ctx.closing))

        return await self._jobs.serve(req.model, answer)

    async def score(self, request: Request) -> Answer:
        req = await parse_body(request, ScoreRequest)
        return await self._scored(request, req, score.create_score, "score")

    async def rerank(self, request: Request) -> Answer:
        req = await parse_body(request, RerankRequest)
        return await self._scored(request, req, score.create_rerank, "rerank")

    async def _scored(
        self,
        request: Request,
        req: ScoreRequest | RerankRequest,
        create: Callable[[ServingContext, Any, str], Awaitable[BaseModel]],
        kind: str,
    ) -> Answer:
        """``create``'s answer to ``req``, on the model it names."""
        rid = f"{kind}-{request_id(request.scope)}"

        async def answer(ctx: ServingContext) -> Answer:
            work = partial(create, ctx, req, rid)
            return json_answer(await run_until_disconnect(request.receive, work, ctx.closing))

        return await self._jobs.serve(req.model, answer)

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

        return await self._jobs.serve(req.model, answer)

    async def detokenize(self, request: Request) -> Answer:
        req = await parse_body(request, DetokenizeRequest)

        async def answer(ctx: ServingContext) -> Answer:
            return json_answer(tokens.detokenize(ctx, req))

        return await self._jobs.serve(req.model, answer)
