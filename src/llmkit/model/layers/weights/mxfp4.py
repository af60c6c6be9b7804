"""mxfp4: the OCP microscaling FP4 weights of a GGUF file (type MXFP4, gpt-oss's experts) as
the file has them, times int8 activations, on the C kernel ``llmkit/kernels/cpu/mxfp4.c``.

A block of 32 inputs is an E8M0 exponent ``e`` and 32 FP4 (E2M1) codes, two a byte (the
first 16 inputs in the low nibbles); as ggml keeps them, a code's value is doubled
(:data:`VALUES`) and the scale halved: ``w = VALUES[code] * 2**(e - 128)``. The codes stay
packed (w4a8's nibble layout) beside one exponent byte a block: 4.25 bits a weight, as in
the file. The activations are quantized as for the other formats (a scale per 32 inputs,
:func:`llmkit.model.layers.weights.kernel.quantize_activations`), so the dot products are integers.
:func:`dequantize` gives the numbers ``gguf.quants.dequantize`` gives, bit for bit.

The kernel is loaded for this CPU by :mod:`llmkit.kernels.cpu.loader` (AVX2, AVX-VNNI or
AVX512-VNNI; the narrower variants load too, to test them). Where it cannot be had,
``KERNEL.linear`` runs the same quantized math in torch.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from llmkit.model.layers.weights.kernel import TILE, Call, Fused, Kernel
from llmkit.model.layers.weights.table import BY_NAME
from llmkit.model.layers.weights.w4a8 import nibbles, per_tile, unnibble

BLOCK = BY_NAME["MXFP4"].block_inputs  # inputs that share an exponent
BLOCK_BYTES = BY_NAME["MXFP4"].block_bytes  # a file's block: the exponent, 16 bytes of codes
VALUES = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)  # ggml's kvalues_mxfp4


class Packed(NamedTuple):
    """``codes`` uint8 ``[tiles, Kp / 8, 32]`` (two codes a byte, w4a8's layout);
    ``exponents`` uint8 ``[tiles, Kp / 32, 8]``, one a column per block."""

    codes: torch.Tensor
    exponents: torch.Tensor


def from_mxfp4(blocks: torch.Tensor, in_features: int) -> Packed:
    """A GGUF file's MXFP4 rows (uint8 ``[out, in / 32 * 17]``) in the kernel's layout: the
    same codes and exponents, zero rows up to whole tiles (exponent 0, code 0: weight 0)."""
    if in_features % BLOCK:
        raise ValueError(f"MXFP4 rows hold whole blocks of {BLOCK}, got {in_features} inputs")
    n = blocks.shape[0]
    b = blocks.reshape(n, in_features // BLOCK, BLOCK_BYTES)
    b = F.pad(b, (0, 0, 0, 0, 0, -(-n // TILE) * TILE - n))
    qs = b[..., 1:]
    codes = torch.cat([qs & 15, qs >> 4], dim=-1).reshape(b.shape[0], in_features)
    return Packed(nibbles(codes), per_tile(b[..., 0].contiguous()))


def scales(exponents: torch.Tensor) -> torch.Tensor:
    """``2**(e - 128)`` in float32 for E8M0 exponents ``e`` (uint8), made from the bits as
    ggml's ``GGML_E8M0_TO_FP32_HALF`` makes them: exact, subnormal below ``e = 2``."""
    e = exponents.to(torch.int32)
    bits = torch.where(e < 2, 0x00200000 << e.clamp(max=1), (e - 1) << 23)
    return bits.view(torch.float32)


def dequantize(packed: Packed) -> torch.Tensor:
    """The padded weight ``[Np, Kp]`` in float32, as the kernel sees it (and as
    ``gguf.quants.dequantize`` gives the file's blocks)."""
    codes, exponents = packed
    q = unnibble(codes)
    np_, kp = q.shape
    values = torch.tensor(VALUES, dtype=torch.float32)[q.long()].view(np_, kp // BLOCK, BLOCK)
    per_column = scales(exponents).transpose(1, 2).reshape(np_, kp // BLOCK, 1)
    return (values * per_column).view(np_, kp)


def read(kind: str, blocks: torch.Tensor, in_features: int) -> Packed:
    """A GGUF file's MXFP4 rows in the kernel's layout."""
    return from_mxfp4(blocks, in_features)


def call(packed: Packed) -> Call:
    return Call(packed, packed.codes.shape[1] * 8)


def fused(packed: Packed) -> Fused:  # 8 inputs of 4-bit codes a row, as w4a8's
    tensors = [packed.codes, None, packed.exponents, None, None, None]
    return Fused(tensors, 0, packed.codes.shape[1] * 8, None, code_sums=True)


KERNEL = Kernel("mxfp4", Packed, read, dequantize, call, 2, fused=fused)
