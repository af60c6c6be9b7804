"""/score and /rerank on an embedding model: each pair's cosine similarity of pooled
embeddings (vLLM's bi-encoder scoring); rerank orders the documents by it."""

from __future__ import annotations

from llmkit.engine.scoring import cosine, pairs, ranked
from llmkit.outputs import EmbeddingRequestOutput
from llmkit.protocol.openai import (
    RerankData,
    RerankDocument,
    RerankRequest,
    RerankResponse,
    RerankUsage,
    ScoreData,
    ScoreRequest,
    ScoreResponse,
    ScoreUsage,
)
from llmkit.sampling_params import PoolingParams
from llmkit.serving.context import ServingContext
from llmkit.serving.engine_calls import run_streams, start_embedding
from llmkit.serving.errors import from_value_error
from llmkit.serving.openai.embeddings import check_fits
from llmkit.serving.prompts import tokenize_inputs


async def create_score(ctx: ServingContext, req: ScoreRequest, request_id: str) -> ScoreResponse:
    """Score ``text_1`` against each ``text_2``; 400s name the field."""
    model = ctx.admit(req, request_id, "embed")
    scores, tokens = await _scores(
        ctx, req, request_id, req.text_1, req.text_2, ("text_1", "text_2")
    )
    return ScoreResponse(
        id=request_id,
        model=model,
        data=[ScoreData(index=i, score=score) for i, score in enumerate(scores)],
        usage=ScoreUsage(prompt_tokens=tokens, total_tokens=tokens),
    )


async def create_rerank(ctx: ServingContext, req: RerankRequest, request_id: str) -> RerankResponse:
    """The documents by their score against the query, highest first (``top_n`` of them)."""
    model = ctx.admit(req, request_id, "embed")
    scores, tokens = await _scores(
        ctx, req, request_id, req.query, req.documents, ("query", "documents")
    )
    results = [
        RerankData(
            index=r.index,
            document=RerankDocument(text=r.document) if req.return_documents else None,
            relevance_score=r.relevance_score,
        )
        for r in ranked(req.documents, scores, req.top_n)
    ]
    return RerankResponse(
        id=request_id, model=model, usage=RerankUsage(total_tokens=tokens), results=results
    )


async def _scores(
    ctx: ServingContext,
    req: ScoreRequest | RerankRequest,
    request_id: str,
    first: str | list[str],
    second: str | list[str],
    names: tuple[str, str],
) -> tuple[list[float], int]:
    """Each pair's cosine similarity, and the tokens embedded."""
    try:
        params = PoolingParams(truncate_prompt_tokens=req.truncate_prompt_tokens)
        count = len(pairs(first, second, names))
    except ValueError as exc:
        raise from_value_error(exc) from None
    prompts = []
    for name, texts in zip(names, (first, second), strict=True):
        tokenized = await tokenize_inputs(ctx, texts, name, params.truncate_prompt_tokens)
        check_fits(ctx, tokenized, name)
        prompts.append(tokenized)
    everything = prompts[0] + prompts[1]
    ctx.log_request(request_id, [first, second], sum(len(p.token_ids) for p in everything), params)
    streams = start_embedding(ctx, request_id, everything, params, req.priority)
    vectors: list[list[float]] = [[] for _ in everything]

    async def handle(i: int, out: EmbeddingRequestOutput) -> None:
        vectors[i] = out.outputs.embedding

    await run_streams(ctx, streams, handle)
    firsts, seconds = vectors[: len(prompts[0])], vectors[len(prompts[0]) :]
    if len(firsts) == 1:
        firsts = firsts * count
    scores = [cosine(a, b) for a, b in zip(firsts, seconds, strict=True)]
    return scores, sum(len(p.token_ids) for p in everything)
