"""Score and rerank on an embedding model, as vLLM does for bi-encoders: the cosine
similarity of the two texts' pooled embeddings. Shared by ``LLM`` and the serving layer."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmkit.errors import ParamError


@dataclass
class ScoringOutput:
    """A pair's score, as vLLM's ``ScoringRequestOutput.outputs`` carries it."""

    score: float


@dataclass
class ScoringRequestOutput:
    """The result of scoring one pair."""

    request_id: str
    prompt_token_ids: list[int]
    outputs: ScoringOutput
    finished: bool = True


@dataclass
class RerankResult:
    """One document's place in a rerank: its index in the input, its text, its score."""

    index: int
    document: str
    relevance_score: float


def pairs(
    text_1: str | Sequence[str],
    text_2: str | Sequence[str],
    names: tuple[str, str] = ("text_1", "text_2"),
) -> list[tuple[str, str]]:
    """The pairs to score: one to one, one to many (a single ``text_1``), or pairwise for
    two lists of one length; a ``ParamError`` naming the field otherwise."""
    firsts = [text_1] if isinstance(text_1, str) else list(text_1)
    seconds = [text_2] if isinstance(text_2, str) else list(text_2)
    for name, texts in zip(names, (firsts, seconds), strict=True):
        if not texts:
            raise ParamError(name, f"{name} must not be empty")
    if len(firsts) == 1:
        firsts = firsts * len(seconds)
    if len(firsts) != len(seconds):
        raise ParamError(
            names[1],
            f"{names[0]} and {names[1]} must have one length (or {names[0]} one text), got "
            f"{len(firsts)} and {len(seconds)}",
        )
    return list(zip(firsts, seconds, strict=True))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors, in double precision (0 for a zero vector)."""
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0


def ranked(
    documents: Sequence[str], scores: Sequence[float], top_n: int | None
) -> list[RerankResult]:
    """The documents by score, highest first (ties in input order), the first ``top_n``."""
    results = [
        RerankResult(i, doc, score)
        for i, (doc, score) in enumerate(zip(documents, scores, strict=True))
    ]
    results.sort(key=lambda r: -r.relevance_score)
    return results[:top_n] if top_n else results
