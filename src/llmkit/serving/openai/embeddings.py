"""/v1/embeddings: inputs -> pooling requests run together; vectors -> floats or base64."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from llmkit.engine.protocol import OutputStream
from llmkit.outputs import EmbeddingRequestOutput
from llmkit.protocol.openai import (
    EmbeddingData,
    EmbeddingRequest,
    EmbeddingResponse,
    EmbeddingUsage,
)
from llmkit.sampling_params import PoolingParams
from llmkit.serving.context import ServingContext
from llmkit.serving.engine_calls import run_streams, start_embedding
from llmkit.serving.errors import bad_request, from_value_error
from llmkit.serving.prompts import EnginePrompt, tokenize_inputs


@dataclass
class EmbeddingJob:
    """A checked, started embedding request."""

    request_id: str
    model: str
    prompts: list[EnginePrompt]
    streams: list[OutputStream[EmbeddingRequestOutput]]
    encoding_format: str


async def prepare_embedding(
    ctx: ServingContext, req: EmbeddingRequest, request_id: str
) -> EmbeddingJob:
    """Check everything, tokenize and start; raises OpenAIError before any response begins."""
    model = ctx.admit(req, request_id, "embed")
    try:
        params = PoolingParams(
            normalize=req.normalize,
            dimensions=req.dimensions,
            truncate_prompt_tokens=req.truncate_prompt_tokens,
        )
    except ValueError as exc:
        raise from_value_error(exc) from None
    prompts = await tokenize_inputs(ctx, req.input, "input", params.truncate_prompt_tokens)
    check_fits(ctx, prompts, "input")
    ctx.log_request(request_id, req.input, sum(len(p.token_ids) for p in prompts), params)
    streams = start_embedding(ctx, request_id, prompts, params, req.priority)
    return EmbeddingJob(request_id, model, prompts, streams, req.encoding_format)


def check_fits(ctx: ServingContext, prompts: list[EnginePrompt], param: str) -> None:
    """A 400 (code context_length_exceeded) naming ``param`` for a prompt over the context."""
    max_model_len = ctx.engine.model_info.max_model_len
    for i, prompt in enumerate(prompts):
        if len(prompt.token_ids) > max_model_len:
            where = param if len(prompts) == 1 else f"{param}[{i}]"
            raise bad_request(
                f"This model's maximum context length is {max_model_len} tokens. However, "
                f"{where} resulted in {len(prompt.token_ids)} tokens. Please reduce the length "
                "of the input, or set truncate_prompt_tokens.",
                param,
                "context_length_exceeded",
            )


async def create_embedding(ctx: ServingContext, job: EmbeddingJob) -> EmbeddingResponse:
    """Embed every input concurrently (the engine batches them); answer in input order."""
    vectors: list[list[float]] = [[] for _ in job.prompts]

    async def handle(i: int, out: EmbeddingRequestOutput) -> None:
        assert isinstance(out, EmbeddingRequestOutput)
        vectors[i] = out.outputs.embedding

    await run_streams(ctx, job.streams, handle)
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
