"""/v1/embeddings: inputs -> pooling requests run together; vectors -> floats or base64."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from llmkit.outputs import EmbeddingRequestOutput
from llmkit.protocol.openai import (
    EmbeddingData,
    EmbeddingRequest,
    EmbeddingResponse,
    EmbeddingUsage,
    PromptInput,
)
from llmkit.sampling_params import PoolingParams
from llmkit.serving.context import ServingContext
from llmkit.serving.engine_calls import EngineOutput, EnginePrompt, run_prompts
from llmkit.serving.errors import bad_request, from_value_error

_POOLING_FIELDS = {"dimensions", "truncate_prompt_tokens", "normalize"}


@dataclass
class EmbeddingJob:
    """A checked embedding request, ready to run."""

    request_id: str
    model: str
    prompts: list[EnginePrompt]
    params: PoolingParams
    encoding_format: str
    priority: int


def prepare_embedding(ctx: ServingContext, req: EmbeddingRequest, request_id: str) -> EmbeddingJob:
    """Check everything and tokenize; raises OpenAIError before anything reaches the engine."""
    model = ctx.admit(req, request_id, "embed")
    try:
        params = PoolingParams(
            normalize=req.normalize,
            dimensions=req.dimensions,
            truncate_prompt_tokens=req.truncate_prompt_tokens,
        )
        ctx.engine.processor.check_pooling_params(params)
    except ValueError as exc:
        raise from_value_error(exc, _POOLING_FIELDS) from None
    prompts = _tokenize(ctx, req.input, params.truncate_prompt_tokens)
    ctx.log_request(request_id, req.input, sum(len(p.token_ids) for p in prompts), params)
    return EmbeddingJob(
        request_id=request_id,
        model=model,
        prompts=prompts,
        params=params,
        encoding_format=req.encoding_format,
        priority=req.priority,
    )


def _tokenize(ctx: ServingContext, inputs: PromptInput, truncate: int | None) -> list[EnginePrompt]:
    if not inputs:
        raise bad_request("input must not be empty", "input")
    single = isinstance(inputs, str) or isinstance(inputs[0], int)
    items = [inputs] if single else inputs
    max_model_len = ctx.engine.max_model_len
    prompts = []
    for i, item in enumerate(items):
        where = "input" if single else f"input[{i}]"
        # A tokenizer would turn "" into [CLS] [SEP] and embed that; OpenAI refuses it.
        if not item:
            raise bad_request(f"{where} must not be empty", "input")
        try:
            text, ids = ctx.engine.processor.tokenize(item, truncate)
        except ValueError as exc:
            raise bad_request(f"{where}: {exc}", "input") from None
        if len(ids) > max_model_len:
            raise bad_request(
                f"This model's maximum context length is {max_model_len} tokens. However, "
                f"{where} resulted in {len(ids)} tokens. Please reduce the length of the input, "
                "or set truncate_prompt_tokens.",
                "input",
                "context_length_exceeded",
            )
        prompts.append(EnginePrompt(text, ids))
    return prompts


async def create_embedding(ctx: ServingContext, job: EmbeddingJob) -> EmbeddingResponse:
    """Embed every input concurrently (the engine batches them); answer in input order."""
    vectors: list[list[float]] = [[] for _ in job.prompts]

    async def handle(i: int, out: EngineOutput) -> None:
        assert isinstance(out, EmbeddingRequestOutput)
        vectors[i] = out.outputs.embedding

    await run_prompts(ctx, job.request_id, job.prompts, job.params, job.priority, handle)
    tokens = sum(len(p.token_ids) for p in job.prompts)
    return EmbeddingResponse(
        model=job.model,
        data=[
            EmbeddingData(index=i, embedding=_encode(v, job.encoding_format))
            for i, v in enumerate(vectors)
        ],
        usage=EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens),
    )


def _encode(vector: Sequence[float], encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        # Little-endian float32, which OpenAI's clients decode with numpy or array("f").
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return list(vector)
