"""Linear layers on oneDNN's prepacked weights, for float32 on CPU.

Decode steps multiply a few rows by every weight, where torch's default float32 GEMM (MKL on
the plain ``[out, in]`` layout) is far from both the memory bandwidth and the FMA peak: on a
2-core AVX2 CPU, 32 rows by a 1024x5632 weight run at ~80 GFLOP/s. oneDNN's matmul on the
weight reordered once into its blocked layout (``mkldnn._reorder_linear_weight``, the packing
inductor uses for frozen CPU linears) is 1.3-2x faster from 1 to ~500 rows, and ~15% slower
from ~700 rows up, where MKL's GEMM is near the FMA peak. The layer keeps only the packed
copy; many-row steps (prefill) get the plain layout back (``to_dense``, a copy that costs
about 1% of such a GEMM) and run MKL.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llmkit.model.layers.parallel_linear import RowParallelLinear
from llmkit.model.layers.swap import replace_linears
from llmkit.model.parallel import TensorParallel

# From this many rows on, MKL's GEMM on the plain weight beats oneDNN's packed matmul
# (measured 1024x5632 and 2816x1024 float32 weights: level at ~600 rows).
DENSE_ROWS = 640
_mkldnn = torch.ops.mkldnn


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    return device.type == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()


class PackedLinear(nn.Module):
    """``y = x W^T + b`` with ``W`` in oneDNN's layout; a row-parallel layer's partial sums
    are all-reduced over its tensor-parallel group, as :class:`RowParallelLinear` does."""

    packed: torch.Tensor
    tp: TensorParallel | None

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("packed", _mkldnn._reorder_linear_weight(linear.weight.detach()))
        self.bias = linear.bias
        tp = linear.tp if isinstance(linear, RowParallelLinear) else None
        self.tp = tp if tp is not None and tp.size > 1 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.tp is not None else self.bias
        if x.numel() >= DENSE_ROWS * self.in_features:
            out = F.linear(x, self.packed.to_dense(), bias)
        else:
            out = _mkldnn._linear_pointwise(x, self.packed, bias, "none", [], "")
        if self.tp is None:
            return out
        out = self.tp.all_reduce(out)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, packed"


def pack_linears(model: nn.Module) -> int:
    """Replace the model's float32 linear layers but its lm_head by PackedLinear."""
    return replace_linears(model, PackedLinear)
