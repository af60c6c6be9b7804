"""w4a8: 4-bit weights times int8 activations (a scale per 32 inputs), on an AVX2 C kernel.

torch has no int4 x int8 kernel on x86 and its int4 weight-only kernel is no faster than
float32 GEMM on AVX2, so this is llama.cpp's q4 matmul recipe in ``llmkit/kernels/cpu/w4a8.c``: each
activation row is quantized to s8 with a scale per block of 32 inputs (llama.cpp's q8_1
blocks), and the 4-bit codes meet it in integer
dot products (``maddubs``), four times as many per instruction as float32 FMAs. The weight
is asymmetric: codes 0..15 with a float16 scale and min per group of ``group`` inputs (the
min rides on each group's sum of activation codes). :func:`pack` lays the codes out for the
kernel (see the C file) and keeps nothing else: 4 + 32 / group bits a weight (5 at group
32, 4.25 at 128).

The kernel is loaded for this CPU by :mod:`llmkit.kernels.cpu.loader`. Where it cannot be
(no AVX2, or no prebuilt library and no compiler), ``KERNEL.linear`` runs the same quantized
math in torch: activation codes times the dequantized weight, equal to the kernel's numbers
up to float rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from llmkit.model.layers.weights.kernel import TILE, Call, Fused, Kernel
from llmkit.model.layers.weights.table import BY_NAME

BLOCK = 32  # inputs whose int16 pair sums cannot saturate; a group is whole blocks


class Packed(NamedTuple):
    """``codes`` uint8 ``[tiles, Kp / 8, 32]`` (two codes a byte, the kernel's layout);
    ``scales`` and ``mins`` float16 ``[tiles, Kp / group, 8]``."""

    codes: torch.Tensor
    scales: torch.Tensor
    mins: torch.Tensor


def group_for(in_features: int, group_size: int) -> int:
    """The group a layer uses: ``group_size``, or its input size rounded up to whole blocks
    when that is smaller (the inputs are zero-padded to whole groups)."""
    return min(group_size, -(-in_features // BLOCK) * BLOCK)


def pack(weight: torch.Tensor, group: int) -> Packed:
    """``weight`` ``[out, in]`` quantized and laid out for the kernel; zero-padded to whole
    tiles of output columns and whole groups of inputs."""
    if group % BLOCK:
        raise ValueError(f"w4a8's group size must be a multiple of {BLOCK}, got {group}")
    n, k = weight.shape
    np_, kp = -(-n // TILE) * TILE, -(-k // group) * group
    w = F.pad(weight.float(), (0, kp - k, 0, np_ - n)).view(np_, kp // group, group)
    low, high = w.amin(dim=-1), w.amax(dim=-1)
    scales, mins = ((high - low) / 15).half(), low.half()
    # The codes are chosen for the float16 scale and min the kernel will use.
    step = torch.where(scales > 0, scales.float(), 1.0)[..., None]
    q = torch.round((w - mins.float()[..., None]) / step).clamp_(0, 15).to(torch.uint8)
    return _layout(q.view(np_, kp), scales, mins)


def from_q4_1(blocks: torch.Tensor, in_features: int) -> Packed:
    """llama.cpp's Q4_1 rows (uint8 ``[out, in / 32 * 20]``) in the kernel's layout: the same
    numbers, not requantized. A Q4_1 block is a float16 scale ``d`` and min ``m`` and 32
    codes ``q`` (two a byte, the first 16 in the low nibbles), worth ``d * q + m``: a w4a8
    group of 32."""
    if in_features % BLOCK:
        raise ValueError(f"Q4_1 rows hold whole blocks of {BLOCK}, got {in_features} inputs")
    n = blocks.shape[0]
    b = blocks.reshape(n, in_features // BLOCK, BY_NAME["Q4_1"].block_bytes)
    b = F.pad(b, (0, 0, 0, 0, 0, -(-n // TILE) * TILE - n))  # zero rows up to whole tiles
    scales = b[..., 0:2].contiguous().view(torch.float16)[..., 0]
    mins = b[..., 2:4].contiguous().view(torch.float16)[..., 0]
    qs = b[..., 4:]
    q = torch.cat([qs & 15, qs >> 4], dim=-1)
    return _layout(q.reshape(b.shape[0], in_features), scales, mins)


def from_q4_0(blocks: torch.Tensor, in_features: int) -> Packed:
    """llama.cpp's Q4_0 rows (uint8 ``[out, in / 32 * 18]``): a float16 scale ``d`` and 32
    codes per block, worth ``d * (q - 8)``, i.e. Q4_1 with the min ``-8 d`` (exact in float16)."""
    if in_features % BLOCK:
        raise ValueError(f"Q4_0 rows hold whole blocks of {BLOCK}, got {in_features} inputs")
    b = blocks.reshape(blocks.shape[0], in_features // BLOCK, BY_NAME["Q4_0"].block_bytes)
    mins = (b[..., 0:2].contiguous().view(torch.float16) * -8).view(torch.uint8)
    q4_1 = torch.cat([b[..., 0:2], mins, b[..., 2:]], dim=-1)
    return from_q4_1(q4_1.reshape(blocks.shape[0], -1), in_features)


def _layout(q: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor) -> Packed:
    """Codes ``q`` uint8 ``[Np, Kp]`` and per-group ``scales``/``mins`` ``[Np, Kp / group]``
    (``Np`` whole tiles) laid out for the kernel."""
    return Packed(nibbles(q), per_tile(scales), per_tile(mins))


def nibbles(q: torch.Tensor) -> torch.Tensor:
    """The low 4 bits of codes ``q`` uint8 ``[Np, Kp]`` in the kernel's layout: uint8
    ``[tiles, Kp / 8, 32]`` (see the C file)."""
    np_, kp = q.shape
    # [tile, column, chunk of 8 inputs, half, 4] -> [tile, chunk, half, column, 4]
    q = (q & 15).view(np_ // TILE, TILE, kp // 8, 2, 4).permute(0, 2, 3, 1, 4)
    return (q[:, :, 0] | q[:, :, 1] << 4).reshape(np_ // TILE, kp // 8, 32).contiguous()


def unnibble(codes: torch.Tensor) -> torch.Tensor:
    """:func:`nibbles` undone: the 4-bit codes uint8 ``[Np, Kp]``."""
    tiles, chunks, _ = codes.shape
    halves = torch.stack([codes & 15, codes >> 4], dim=2).view(tiles, chunks, 2, TILE, 4)
    return halves.permute(0, 3, 1, 2, 4).reshape(tiles * TILE, chunks * 8)


def per_tile(t: torch.Tensor) -> torch.Tensor:
    """A per-column table ``[Np, groups]`` as the kernels read it: ``[tiles, groups, 8]``."""
    return t.view(t.shape[0] // TILE, TILE, -1).transpose(1, 2).contiguous()


def dequantize(packed: Packed) -> torch.Tensor:
    """The padded weight ``[Np, Kp]`` in float32, as the kernel sees it."""
    codes, scales, mins = packed
    tiles, chunks, _ = codes.shape
    q = unnibble(codes).view(tiles * TILE, -1, chunks * 8 // scales.shape[1])

    def per_column(t: torch.Tensor) -> torch.Tensor:
        return t.float().transpose(1, 2).reshape(tiles * TILE, -1, 1)

    return (q.float() * per_column(scales) + per_column(mins)).view(tiles * TILE, chunks * 8)


_READERS = {"Q4_0": from_q4_0, "Q4_1": from_q4_1}


def read(kind: str, blocks: torch.Tensor, in_features: int) -> Packed:
    """A GGUF file's ``kind`` rows (Q4_0 or Q4_1) in the kernel's layout."""
    return _READERS[kind](blocks, in_features)


def quantize(weight: torch.Tensor, group_size: int) -> Packed:
    """``weight`` as ``quantization="w4a8"`` holds it: :func:`pack` at the layer's group."""
    return pack(weight, group_for(weight.shape[1], group_size))


def call(packed: Packed) -> Call:
    kp = packed.codes.shape[1] * 8  # a tile's 32-byte rows hold 8 inputs of 4-bit codes
    return Call(packed, kp, (kp // packed.scales.shape[1],))


def fused(packed: Packed) -> Fused:
    kp = packed.codes.shape[1] * 8  # a tile's 32-byte rows hold 8 inputs of 4-bit codes
    tensors = [packed.codes, None, packed.scales, packed.mins, None, None]
    return Fused(tensors, 0, kp, kp // packed.scales.shape[1])


KERNEL = Kernel("w4a8", Packed, read, dequantize, call, 3, 1, fused=fused, quantize=quantize)
