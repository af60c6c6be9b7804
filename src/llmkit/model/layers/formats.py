"""The GGUF weight formats that run as the file has them: one class each, asked by the loader
(which tensors load natively, and how), the native layers (which kernel multiplies) and the
fused decode step (the kernel's kind). A new type is a new class and its kernel, entered in
:data:`FORMATS`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from llmkit.model.layers import kquant, mxfp4, q8, w4a8

Packed = Any  # one of w4a8.Packed, q8.Packed, kquant.Packed, mxfp4.Packed: what a kernel reads


@dataclass(frozen=True)
class WeightFormat:
    """A GGUF tensor type with a native kernel.

    ``block_inputs``/``block_bytes``: a block of the file (a row holds whole blocks);
    ``fused_kind``: its kernel's number (0 w4a8, 1 q8, 2 kq, 3 mxfp4), which the fused decode
    step dispatches on."""

    name: str
    block_inputs: int
    block_bytes: int
    fused_kind: int
    read_blocks: Callable[[torch.Tensor, int], Packed]
    multiply: Callable[[torch.Tensor, Packed, int], torch.Tensor]
    widen: Callable[[Packed], torch.Tensor]

    @property
    def packed_type(self) -> type:
        """The tuple its kernel reads (:meth:`read`'s result)."""
        return (w4a8.Packed, q8.Packed, kquant.Packed, mxfp4.Packed)[self.fused_kind]

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.block_bytes / self.block_inputs

    def read(self, blocks: torch.Tensor, in_features: int) -> Packed:
        """The file's rows (uint8 ``[out, in / block_inputs * block_bytes]``) for the kernel."""
        return self.read_blocks(blocks, in_features)

    def linear(self, x: torch.Tensor, packed: Packed, out_features: int) -> torch.Tensor:
        """``x`` ``[M, K]`` float32 times the weight's transpose: ``[M, out_features]``."""
        return self.multiply(x, packed, out_features)

    def dequantize(self, packed: Packed) -> torch.Tensor:
        """The padded weight ``[Np, Kp]`` in float32, as the kernel sees it."""
        return self.widen(packed)

    def rows(self, packed: Packed, ids: torch.Tensor) -> torch.Tensor:
        """Float32 rows ``ids`` (1-D) of the padded weight: an embedding lookup that
        dequantizes only the tiles of 8 rows it reads."""
        if isinstance(packed, q8.Packed):
            return q8.rows(packed, ids)
        tiles, at = torch.unique(ids // w4a8.TILE, return_inverse=True)
        taken = type(packed)(*(_take(t, tiles) for t in packed))
        return self.widen(taken)[at * w4a8.TILE + ids % w4a8.TILE]


def _take(t: Any, tiles: torch.Tensor) -> Any:
    """A packed field's tiles ``tiles`` (every table is ``[tiles, ...]``; a name passes)."""
    return t.index_select(0, tiles) if isinstance(t, torch.Tensor) and t.numel() else t


def _kq(name: str) -> WeightFormat:
    return WeightFormat(
        name,
        kquant.BLOCK_INPUTS[name],
        kquant.BLOCK_BYTES[name],
        2,
        lambda blocks, k: kquant.read(name, blocks, k),
        kquant.linear,
        kquant.dequantize,
    )


def _w4a8(name: str, read: Callable[[torch.Tensor, int], w4a8.Packed]) -> WeightFormat:
    return WeightFormat(
        name, w4a8.BLOCK, 20 if name == "Q4_1" else 18, 0, read, w4a8.linear, w4a8.dequantize
    )


FORMATS: dict[str, WeightFormat] = {
    "Q4_0": _w4a8("Q4_0", w4a8.from_q4_0),
    "Q4_1": _w4a8("Q4_1", w4a8.from_q4_1),
    "Q8_0": WeightFormat(
        "Q8_0", q8.BLOCK, q8.Q8_0_BYTES, 1, q8.from_q8_0, q8.linear, q8.dequantize
    ),
    **{name: _kq(name) for name in kquant.BLOCK_BYTES},
    "MXFP4": WeightFormat(
        "MXFP4",
        mxfp4.BLOCK,
        mxfp4.BLOCK_BYTES,
        3,
        mxfp4.from_mxfp4,
        mxfp4.linear,
        mxfp4.dequantize,
    ),
}
