"""Pooling requests' share of a step: their chunks into their accumulators, embeddings out."""

from __future__ import annotations

import torch

from llmkit.engine.core.seq_state import SeqState
from llmkit.engine.sched.request import Request
from llmkit.model.pooler import PoolingAccumulator, finish_embeddings, reduce_chunks


def pool_step(
    pooled: list[tuple[Request, int, int]],
    hidden: torch.Tensor,
    seqs: dict[Request, SeqState],
    normalize: bool,
) -> list[tuple[Request, list[float]]]:
    """Pool this step's chunks (request, offset in ``hidden``, count); returns the requests
    whose input is now all pooled, with their embeddings (``normalize``: the model's default
    for requests that leave it unset)."""
    poolers = [_pooler(seqs[req]) for req, _, _ in pooled]
    chunks = [(p.pooling_type, off, n) for p, (_, off, n) in zip(poolers, pooled)]
    done: list[Request] = []
    for pooler, (req, _, n), part in zip(poolers, pooled, reduce_chunks(hidden, chunks)):
        pooler.add(part, n)
        if req.num_computed_tokens >= req.num_tokens:
            done.append(req)
    if not done:
        return []
    settings = []
    for req in done:
        params = req.pooling_params
        assert params is not None
        settings.append(
            (normalize if params.normalize is None else params.normalize, params.dimensions)
        )
    vectors = [_pooler(seqs[req]).vector() for req in done]
    return list(zip(done, finish_embeddings(vectors, settings)))


def _pooler(seq: SeqState) -> PoolingAccumulator:
    assert seq.pooler is not None
    return seq.pooler
