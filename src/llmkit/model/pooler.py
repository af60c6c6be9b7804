"""Pooling hidden states into one vector: last token, mean, or CLS (first token).

A step reduces the chunks of all its pooling requests at once, and the requests that
finish in it get their embeddings in one batch: a handful of tensor ops per step rather
than several per request.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

POOLING_TYPES = ("last", "mean", "cls")


class PoolingAccumulator:
    """Pools one request's hidden states, which may arrive over several prefill chunks."""

    def __init__(self, pooling_type: str):
        if pooling_type not in POOLING_TYPES:
            raise ValueError(
                f"pooling type must be one of {', '.join(POOLING_TYPES)}, got {pooling_type!r}"
            )
        self.pooling_type = pooling_type
        self._acc: torch.Tensor | None = None
        self._count = 0

    def add(self, part: torch.Tensor, count: int) -> None:
        """Feed the next chunk of ``count`` rows, as :func:`reduce_chunks` reduced it."""
        if self.pooling_type == "mean":
            self._acc = part if self._acc is None else self._acc + part
        elif self.pooling_type == "last" or self._acc is None:
            self._acc = part
        self._count += count

    def vector(self) -> torch.Tensor:
        """The pooled float32 vector of everything fed so far."""
        assert self._acc is not None, "vector() before any add()"
        return self._acc / self._count if self.pooling_type == "mean" else self._acc


def reduce_chunks(hidden: torch.Tensor, chunks: Sequence[tuple[str, int, int]]) -> torch.Tensor:
    """One float32 row per chunk ``(pooling_type, first row, num rows)`` of ``hidden``.

    The row is the sum of the chunk's rows for mean pooling, its first row for cls and its
    last for last pooling.
    """
    num = len(chunks)
    out = torch.zeros(num + 1, hidden.shape[-1], dtype=torch.float32, device=hidden.device)
    # Every row of the step is summed into its chunk's output row; rows that no mean
    # chunk owns (other requests, cls/last chunks) go to a spare last row, dropped below.
    segment = [num] * hidden.shape[0]
    picked: list[int] = []
    picked_rows: list[int] = []
    for i, (kind, first, n) in enumerate(chunks):
        if kind == "mean":
            segment[first : first + n] = [i] * n
        else:
            picked.append(i)
            picked_rows.append(first if kind == "cls" else first + n - 1)
    if len(picked) < num:
        out.index_add_(0, torch.tensor(segment, device=hidden.device), hidden.float())
    if picked:
        rows = torch.tensor(picked_rows, device=hidden.device)
        out[torch.tensor(picked, device=hidden.device)] = hidden[rows].float()
    return out[:num]


def finish_embeddings(
    vectors: Sequence[torch.Tensor], settings: Sequence[tuple[bool, int | None]]
) -> list[list[float]]:
    """Each vector cut to its ``dimensions``, then L2-normalized if asked.

    ``settings`` holds ``(normalize, dimensions)`` per vector; vectors alike go in one batch.
    """
    result: list[list[float]] = [[] for _ in vectors]
    batches: dict[tuple[bool, int | None], list[int]] = {}
    for i, setting in enumerate(settings):
        batches.setdefault(setting, []).append(i)
    for (normalize, dimensions), members in batches.items():
        batch = torch.stack([vectors[i] for i in members])
        if dimensions is not None:
            batch = batch[:, :dimensions]
        if normalize:
            batch = F.normalize(batch, p=2, dim=-1)
        for i, row in zip(members, batch.tolist()):
            result[i] = row
    return result
