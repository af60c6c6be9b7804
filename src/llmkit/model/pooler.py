"""Pooling hidden states into one vector: last token, mean, or CLS (first token)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

POOLING_TYPES = ("last", "mean", "cls")


class PoolingAccumulator:
    """Pools one request's hidden states, which may arrive over several prefill chunks."""

    def __init__(self, pooling_type: str):
        if pooling_type not in POOLING_TYPES:
            raise ValueError(f"pooling type must be one of {', '.join(POOLING_TYPES)}, got {pooling_type!r}")
        self.pooling_type = pooling_type
        self._acc: torch.Tensor | None = None
        self._count = 0

    def add(self, hidden: torch.Tensor) -> None:
        """Feed the next chunk's rows ``[n, hidden]`` (in order)."""
        if self.pooling_type == "mean":
            part = hidden.float().sum(0)
            self._acc = part if self._acc is None else self._acc + part
        elif self.pooling_type == "last":
            self._acc = hidden[-1].float()
        elif self._acc is None:
            self._acc = hidden[0].float()
        self._count += hidden.shape[0]

    def result(self, normalize: bool, dimensions: int | None) -> list[float]:
        vec = self._acc / self._count if self.pooling_type == "mean" else self._acc
        if dimensions is not None:
            vec = vec[:dimensions]
        if normalize:
            vec = F.normalize(vec, p=2, dim=-1)
        return vec.tolist()
