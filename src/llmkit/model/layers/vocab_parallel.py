"""The token embedding and LM head split by vocabulary rows over tensor-parallel ranks.

Each rank holds a contiguous range of ``ceil(vocab / size)`` rows (the last one padded
with zeros); an embedding sums the ranks' lookups, the head gathers their logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmkit.model.parallel import TensorParallel
from llmkit.model.weights import FromCheckpoint, Weight, read, set_weight_loader


def _vocab_range(vocab_size: int, tp: TensorParallel) -> tuple[int, int, int]:
    """This rank's ``(first row, rows it reads, rows it holds)``."""
    per_rank = -(-vocab_size // tp.size)
    start = min(tp.rank * per_rank, vocab_size)
    return start, min(per_rank, vocab_size - start), per_rank


def _load_rows(param: nn.Parameter, weight: Weight, start: int, rows: int) -> None:
    param.data.zero_()  # the padding rows past the vocabulary
    param.data[:rows].copy_(read(weight, 0, start, rows))


class VocabParallelEmbedding(FromCheckpoint, nn.Embedding):
    def __init__(self, vocab_size: int, hidden: int, tp: TensorParallel) -> None:
        self.start, self.rows, per_rank = _vocab_range(vocab_size, tp)
        super().__init__(per_rank, hidden)
        self.tp = tp
        set_weight_loader(self.weight, self.load_rows)

    def load_rows(self, param: nn.Parameter, weight: Weight, piece: int | None) -> None:
        _load_rows(param, weight, self.start, self.rows)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.tp.size == 1:
            return super().forward(ids)
        outside = (ids < self.start) | (ids >= self.start + self.rows)
        local = torch.where(outside, 0, ids - self.start)
        out = F.embedding(local, self.weight).masked_fill_(outside.unsqueeze(-1), 0)
        return self.tp.all_reduce(out)


class ParallelLMHead(FromCheckpoint, nn.Linear):
    """Logits of this rank's vocabulary rows; rank 0 gathers the whole vocabulary."""

    def __init__(self, hidden: int, vocab_size: int, tp: TensorParallel) -> None:
        self.start, self.rows, per_rank = _vocab_range(vocab_size, tp)
        super().__init__(hidden, per_rank, bias=False)
        self.vocab_size = vocab_size
        self.tp = tp
        set_weight_loader(self.weight, self.load_rows)

    def load_rows(self, param: nn.Parameter, weight: Weight, piece: int | None) -> None:
        _load_rows(param, weight, self.start, self.rows)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = super().forward(x)
        if self.tp.size == 1:
            return logits
        return self.tp.gather_last_dim(logits)[..., : self.vocab_size]
