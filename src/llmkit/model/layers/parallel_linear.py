"""Linear layers sharded over tensor-parallel ranks, and the rules that slice their weights.

A column-parallel layer keeps this rank's output rows (no communication); a row-parallel
one keeps its input columns and sums the partial products over the ranks. At size 1 both
are a plain ``nn.Linear``, computing exactly what it does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmkit.model.parallel import TensorParallel
from llmkit.model.weights import FromCheckpoint, Weight, read, set_weight_loader


class ColumnParallelLinear(FromCheckpoint, nn.Linear):
    """Fused output pieces, each cut to this rank's ``(start, length)`` rows of the piece."""

    def __init__(self, in_features: int, pieces: list[tuple[int, int]], bias: bool) -> None:
        super().__init__(in_features, sum(n for _, n in pieces), bias=bias)
        self.pieces = pieces
        for param in self.parameters():
            set_weight_loader(param, self.load_piece)

    def load_piece(self, param: nn.Parameter, weight: Weight, piece: int | None) -> None:
        index = piece or 0
        offset = sum(n for _, n in self.pieces[:index])
        start, length = self.pieces[index]
        param.data[offset : offset + length].copy_(read(weight, 0, start, length))


def merged_column_parallel(
    in_features: int, sizes: list[int], bias: bool, tp: TensorParallel
) -> ColumnParallelLinear:
    """Pieces (gate and up projections) each split evenly over the ranks."""
    return ColumnParallelLinear(
        in_features, [tp.shard(n, "intermediate_size") for n in sizes], bias
    )


class QKVParallelLinear(ColumnParallelLinear):
    """q, k and v split by heads. With fewer KV heads than ranks, each KV head is
    replicated on ``size / num_kv_heads`` ranks, which hold the query heads it serves."""

    def __init__(
        self,
        hidden: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        bias: bool,
        tp: TensorParallel,
    ) -> None:
        q_start, self.num_heads = tp.shard(num_heads, "num_attention_heads")
        if num_kv_heads >= tp.size:
            kv_start, self.num_kv_heads = tp.shard(num_kv_heads, "num_key_value_heads")
        elif tp.size % num_kv_heads:
            raise ValueError(
                f"tensor_parallel_size={tp.size} must be a multiple of num_key_value_heads "
                f"({num_kv_heads}) when it is larger"
            )
        else:
            kv_start, self.num_kv_heads = tp.rank * num_kv_heads // tp.size, 1
        q = (q_start * head_dim, self.num_heads * head_dim)
        kv = (kv_start * head_dim, self.num_kv_heads * head_dim)
        super().__init__(hidden, [q, kv, kv], bias)


class RowParallelLinear(FromCheckpoint, nn.Linear):
    """This rank's input columns; the partial outputs are summed over the ranks."""

    def __init__(self, in_features: int, out_features: int, bias: bool, tp: TensorParallel):
        self.start, local = tp.shard(in_features, "a row-parallel layer's input")
        super().__init__(local, out_features, bias=bias)
        self.tp = tp
        set_weight_loader(self.weight, self.load_columns)

    def load_columns(self, param: nn.Parameter, weight: Weight, piece: int | None) -> None:
        param.data.copy_(read(weight, 1, self.start, self.in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tp.size == 1:
            return super().forward(x)
        out = self.tp.all_reduce(F.linear(x, self.weight))
        return out if self.bias is None else out + self.bias
