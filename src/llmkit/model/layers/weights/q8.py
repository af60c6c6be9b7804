"""q8: 8-bit weights with a float16 scale per 32 inputs (llama.cpp's Q8_0) times int8
activations with a scale per 32 inputs, on the C kernel ``llmkit/kernels/cpu/q8.c``.

A GGUF file's Q8_0 tensors load here as they are, not widened: its token embedding (rows
dequantized as they are looked up), the LM head tied to it (one copy of the codes serves
both), and Q8_0 linear layers. The activations are quantized exactly as w4a8's (the same
codes and block scales, :func:`llmkit.model.layers.weights.kernel.quantize_activations`), so the
products are llama.cpp's ``q8_0 x q8_0`` dot products.

The kernel is loaded for this CPU by :mod:`llmkit.kernels.cpu.loader`: with AVX512-VNNI or
AVX-VNNI it multiplies with ``dpbusd``, else with AVX2's ``maddubs``; the narrower variants
load on a machine that has the wider ones, so tests check each. Where no kernel can be had,
``KERNEL.linear`` runs the same quantized math in torch.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from llmkit.model.layers.weights.kernel import TILE, Call, Fused, Kernel
from llmkit.model.layers.weights.table import BY_NAME

BLOCK = BY_NAME["Q8_0"].block_inputs  # inputs that share a scale
Q8_0_BYTES = BY_NAME["Q8_0"].block_bytes  # a Q8_0 block: float16 scale, 32 s8 codes


class Packed(NamedTuple):
    """``codes`` int8 ``[tiles, Kp / 4, 32]`` (the kernel's layout); ``scales`` float16
    ``[tiles, Kp / 32, 8]``."""

    codes: torch.Tensor
    scales: torch.Tensor


def from_q8_0(blocks: torch.Tensor, in_features: int) -> Packed:
    """llama.cpp's Q8_0 rows (uint8 ``[out, in / 32 * 34]``) in the kernel's layout: the same
    numbers. A block is a float16 scale ``d`` and 32 s8 codes ``q``, worth ``d * q``."""
    if in_features % BLOCK:
        raise ValueError(f"Q8_0 rows hold whole blocks of {BLOCK}, got {in_features} inputs")
    n = blocks.shape[0]
    b = blocks.reshape(n, in_features // BLOCK, Q8_0_BYTES)
    b = F.pad(b, (0, 0, 0, 0, 0, -(-n // TILE) * TILE - n))  # zero rows up to whole tiles
    scales = b[..., :2].contiguous().view(torch.float16)[..., 0]
    codes = b[..., 2:].contiguous().view(torch.int8)
    return _layout(codes.reshape(b.shape[0], in_features), scales)


def pack(weight: torch.Tensor) -> Packed:
    """``weight`` ``[out, in]`` quantized symmetrically per 32 inputs (as llama.cpp's Q8_0),
    zero-padded to whole tiles of output columns and whole blocks of inputs."""
    n, k = weight.shape
    np_, kp = -(-n // TILE) * TILE, -(-k // BLOCK) * BLOCK
    w = F.pad(weight.float(), (0, kp - k, 0, np_ - n)).view(np_, kp // BLOCK, BLOCK)
    scales = (w.abs().amax(dim=-1) / 127).half()
    step = torch.where(scales > 0, scales.float(), 1.0)[..., None]
    codes = torch.round(w / step).clamp_(-127, 127).to(torch.int8)
    return _layout(codes.view(np_, kp), scales)


def _layout(codes: torch.Tensor, scales: torch.Tensor) -> Packed:
    """Codes int8 ``[Np, Kp]`` and scales ``[Np, Kp / 32]`` (``Np`` whole tiles) laid out for
    the kernel: per tile, per 4 inputs, the 8 columns' 4 codes."""
    np_, kp = codes.shape
    tiled = codes.view(np_ // TILE, TILE, kp // 4, 4).permute(0, 2, 1, 3)
    per_tile = scales.view(np_ // TILE, TILE, -1).transpose(1, 2)
    return Packed(tiled.reshape(np_ // TILE, kp // 4, 32).contiguous(), per_tile.contiguous())


def rows(packed: Packed, ids: torch.Tensor) -> torch.Tensor:
    """Float32 rows ``ids`` (1-D) of the padded weight ``[len(ids), Kp]``: an embedding lookup
    that dequantizes only the rows it reads."""
    codes, scales = packed
    tiles, chunks, _ = codes.shape
    tile, column = ids // TILE, ids % TILE
    q = codes.view(tiles, chunks, TILE, 4)[tile, :, column]  # [n, Kp / 4, 4]
    s = scales[tile, :, column]  # [n, Kp / 32]
    return (q.float().view(len(ids), -1, BLOCK) * s.float()[..., None]).view(len(ids), -1)


def dequantize(packed: Packed) -> torch.Tensor:
    """The padded weight ``[Np, Kp]`` in float32, as the kernel sees it."""
    return rows(packed, torch.arange(packed.codes.shape[0] * TILE))


def read(kind: str, blocks: torch.Tensor, in_features: int) -> Packed:
    """A GGUF file's Q8_0 rows in the kernel's layout."""
    return from_q8_0(blocks, in_features)


def quantize(weight: torch.Tensor, group_size: int) -> Packed:
    """``weight`` as ``quantization="w8a8"`` holds it: :func:`pack` (a scale per 32 inputs
    whatever the group size asked)."""
    return pack(weight)


def call(packed: Packed) -> Call:  # 4 inputs of 8-bit codes a row
    return Call(packed, packed.codes.shape[1] * 4)


def fused(packed: Packed) -> Fused:  # 4 inputs of 8-bit codes a row, no group sums
    return Fused(
        [packed.codes, None, packed.scales, None, None, None], 0, packed.codes.shape[1] * 4, None
    )


KERNEL = Kernel("q8", Packed, read, dequantize, call, 2, fused=fused, quantize=quantize, rows=rows)
