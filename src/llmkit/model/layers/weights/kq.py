"""llama.cpp's Q5_0, Q5_1 and K-quant (Q4_K, Q5_K, Q6_K) weights as the file has them, times
int8 activations, on the C kernel ``llmkit/kernels/cpu/kq.c``.

A GGUF block's numbers are kept, not requantized: its codes (their low four bits laid out as
w4a8's, the higher bits in a plane beside them) and its scales: Q5's float16 scale and min
per 32 inputs (Q5_0 as Q5_1 with the min ``-16 d``), the K-quants' float16 ``d`` (and
``dmin``) per super-block of 256 with their 6- or 8-bit integer scales (and mins) per 32 or
16 inputs. The activations are quantized as for w4a8 and q8 (a scale per 32 inputs), so the
layers of one model, whatever their formats, share one quantized input. :func:`dequantize`
gives the numbers ``gguf.quants.dequantize`` gives, bit for bit.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.loader import load_function
from llmkit.model.layers.weights.kernel import TILE, Call, Fused, Kernel
from llmkit.model.layers.weights.table import BY_NAME, FORMATS, layouts
from llmkit.model.layers.weights.w4a8 import nibbles, per_tile, unnibble

SOURCE = SOURCES / "kq.c"
SUPER = BY_NAME["Q4_K"].block_inputs  # a K-quant super-block's inputs
LAYOUTS = layouts("kq")  # Packed.fmt's values, in the kernel's numbering (Q5_0 is Q5_1's)
TYPES = {f.name: f for f in FORMATS if f.kernel == "kq"}  # the GGUF types it reads
_I64, _P = ctypes.c_int64, ctypes.c_void_p
_EMPTY = torch.empty(0, dtype=torch.uint8)


class Packed(NamedTuple):
    """One kq weight: ``fmt`` one of :data:`LAYOUTS`; ``lo`` the codes' low nibbles uint8
    ``[tiles, Kp / 8, 32]``; ``hi`` their 5th (6th) bits ``[tiles, Kp / 32 (16), 32]`` or
    empty; ``sc``, ``mn`` Q5's float16 scales and mins or the K-quants' integer sub-block
    scales and mins (Q6_K: none), ``d``, ``dmin`` the K-quants' float16 per super-block; each
    table ``[tiles, count, 8]``."""

    fmt: str
    lo: torch.Tensor
    hi: torch.Tensor
    sc: torch.Tensor
    mn: torch.Tensor
    d: torch.Tensor
    dmin: torch.Tensor


@functools.cache
def load_packer() -> Callable[..., int] | None:
    """The C function that lays a file's blocks out (:func:`read`'s one-pass path)."""
    return load_function(SOURCE, "kq_pack", [_P, _I64, _I64, _I64, _I64] + [_P] * 6 + [_I64])


def read(kind: str, blocks: torch.Tensor, in_features: int) -> Packed:
    """GGUF rows of type ``kind`` (uint8 ``[out, in / block * bytes]``) in the kernel's layout:
    in one pass of C where it builds (a 1B-class file's 600 MB in seconds), else in torch."""
    per = TYPES[kind].block_inputs
    if in_features % per:
        raise ValueError(f"{kind} rows hold whole blocks of {per}, got {in_features} inputs")
    packer = load_packer()
    if packer is None:
        return read_in_torch(kind, blocks, in_features)
    n, k = blocks.shape[0], in_features
    tiles, fmt = -(-n // TILE), TYPES[kind].layout

    def table(count: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(tiles, count, TILE, dtype=dtype)

    u8 = torch.uint8
    hi = {"Q4_K": _EMPTY, "Q6_K": torch.zeros(tiles, k // 16, 32, dtype=u8)}.get(
        kind, torch.zeros(tiles, k // 32, 32, dtype=u8)
    )
    if fmt == "Q5":
        sc, mn, d, dmin = (
            table(k // 32, torch.float16),
            table(k // 32, torch.float16),
            _EMPTY,
            _EMPTY,
        )
    elif fmt == "Q6_K":
        sc, mn, d, dmin = (
            table(k // 16, torch.int8),
            _EMPTY,
            table(k // SUPER, torch.float16),
            _EMPTY,
        )
    else:
        sc, mn = table(k // 32, u8), table(k // 32, u8)
        d, dmin = table(k // SUPER, torch.float16), table(k // SUPER, torch.float16)
    packed = Packed(fmt, torch.zeros(tiles, k // 8, 32, dtype=u8), hi, sc, mn, d, dmin)
    blocks = blocks.contiguous()
    packer(
        blocks.data_ptr(),
        blocks.shape[1],
        n,
        k,
        TYPES[kind].number,  # formats.h's G_Q5_0 .. G_Q6_K
        *(t.data_ptr() if t.numel() else None for t in packed[1:]),
        torch.get_num_threads(),
    )
    return packed


def read_in_torch(kind: str, blocks: torch.Tensor, in_features: int) -> Packed:
    """:func:`read` in torch ops (where no C compiler is): the same tensors, bit for bit."""
    per = TYPES[kind].block_inputs
    n = blocks.shape[0]
    b = blocks.reshape(n, in_features // per, TYPES[kind].block_bytes)
    b = F.pad(b, (0, 0, 0, 0, 0, -(-n // TILE) * TILE - n))  # zero rows up to whole tiles
    return _READERS[kind](b)


def _half(b: torch.Tensor, at: int) -> torch.Tensor:
    """The float16 at byte ``at`` of each block ``[..., bytes]``: ``[...]``."""
    return b[..., at : at + 2].contiguous().view(torch.float16)[..., 0]


def _bits(qh: torch.Tensor, count: int, width: int = 1) -> torch.Tensor:
    """``qh`` ``[..., bytes]`` as ``count`` fields of ``width`` bits a byte, low first:
    ``[..., count, bytes]``."""
    shifts = torch.arange(count, dtype=torch.uint8).view(count, 1) * width
    return (qh.unsqueeze(-2) >> shifts) & ((1 << width) - 1)


def _q5(b: torch.Tensor, with_min: bool) -> Packed:
    d = _half(b, 0)
    m = _half(b, 2) if with_min else d * -16  # Q5_0: d (q - 16), exact in float16
    rest = b[..., 4:] if with_min else b[..., 2:]
    qh = _bits(rest[..., :4], 8).transpose(-1, -2).reshape(*b.shape[:2], 32)  # bit i: input i
    qs = rest[..., 4:]
    q = torch.cat([qs & 15, qs >> 4], dim=-1) | qh << 4
    return _layout("Q5", q.reshape(b.shape[0], -1), d, m, _EMPTY, _EMPTY)


def _scale_min(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K/Q5_K's 12 bytes of 6-bit scales and mins ``[..., 12]``: each ``[..., 8]``."""
    d, m, md = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = torch.cat([d & 63, (md & 15) | ((d >> 2) & 48)], dim=-1)
    mn = torch.cat([m & 63, (md >> 4) | ((m >> 2) & 48)], dim=-1)
    return sc, mn


def _k45(b: torch.Tensor, five: bool) -> Packed:
    n, blocks = b.shape[:2]
    sc, mn = _scale_min(b[..., 4:16])
    qs = b[..., 48:] if five else b[..., 16:]
    q = torch.stack([qs.view(n, blocks, 4, 32) & 15, qs.view(n, blocks, 4, 32) >> 4], dim=3)
    q = q.reshape(n, blocks, SUPER)  # sub-block 2j: low nibbles of 32 bytes j, 2j + 1: high
    if five:  # bit i of byte l: sub-block i's input l
        q = q | (_bits(b[..., 16:48], 8).reshape(n, blocks, SUPER) << 4)
    fmt = "Q5_K" if five else "Q4_K"
    return _layout(fmt, q.reshape(n, -1), sc.reshape(n, -1), mn.reshape(n, -1), *_d(b, 0, 2))


def _d(b: torch.Tensor, *at: int) -> list[torch.Tensor]:
    return [_half(b, i) for i in at]


def _k6(b: torch.Tensor) -> Packed:
    n, blocks = b.shape[:2]
    ql = b[..., :128].reshape(n, blocks, 2, 1, 64) >> torch.tensor([0, 4], dtype=torch.uint8).view(
        2, 1
    )
    ql = (ql & 15).reshape(n, blocks, 2, 128)  # per half of 128: low nibbles then high
    qh = _bits(b[..., 128:192].reshape(n, blocks, 2, 32), 4, 2).reshape(n, blocks, 2, 128)
    q = (ql | qh << 4).reshape(n, -1)
    sc = b[..., 192:208].contiguous().view(torch.int8).reshape(n, -1)
    return _layout("Q6_K", q, sc, _EMPTY, _half(b, 208), _EMPTY)


_READERS: dict[str, Callable[[torch.Tensor], Packed]] = {
    "Q5_0": lambda b: _q5(b, with_min=False),
    "Q5_1": lambda b: _q5(b, with_min=True),
    "Q4_K": lambda b: _k45(b, five=False),
    "Q5_K": lambda b: _k45(b, five=True),
    "Q6_K": _k6,
}


def _layout(
    fmt: str,
    q: torch.Tensor,
    sc: torch.Tensor,
    mn: torch.Tensor,
    d: torch.Tensor,
    dmin: torch.Tensor,
) -> Packed:
    """Codes ``q`` uint8 ``[Np, Kp]`` (``Np`` whole tiles) and per-column tables
    ``[Np, count]`` laid out for the kernel (see the C file)."""
    np_, kp = q.shape
    tiles = np_ // TILE
    if fmt == "Q4_K":
        hi = _EMPTY
    elif fmt == "Q6_K":  # [tile, column, 16s, step, half, j] -> [tile, 16s, column, j, step, half]
        h = (q >> 4).view(tiles, TILE, kp // 16, 2, 2, 4).permute(0, 2, 1, 5, 3, 4)
        shifts = torch.arange(0, 8, 2, dtype=torch.uint8)
        hi = (h.reshape(tiles, kp // 16, 32, 4) << shifts).sum(-1, dtype=torch.uint8)
    else:
        h = ((q >> 4) & 1).view(tiles, TILE, kp // 32, 4, 2, 4).permute(0, 2, 1, 5, 3, 4)
        shifts = torch.arange(8, dtype=torch.uint8)
        hi = (h.reshape(tiles, kp // 32, 32, 8) << shifts).sum(-1, dtype=torch.uint8)
    tables = [per_tile(t) if t.numel() else t for t in (sc, mn, d, dmin)]
    return Packed(fmt, nibbles(q), hi.contiguous(), *tables)


def _columns(t: torch.Tensor) -> torch.Tensor:
    """A ``[tiles, count, 8]`` table per column: float32 ``[tiles * 8, count]``."""
    return t.float().transpose(1, 2).reshape(-1, t.shape[1])


def dequantize(packed: Packed) -> torch.Tensor:
    """The padded weight ``[Np, Kp]`` in float32, as the kernel sees it (and as
    ``gguf.quants.dequantize`` gives the file's blocks)."""
    fmt, lo, hi = packed.fmt, packed.lo, packed.hi
    q = unnibble(lo)
    np_, kp = q.shape
    tiles = np_ // TILE
    if fmt == "Q6_K":
        h = torch.stack([(hi >> s) & 3 for s in range(0, 8, 2)], dim=-1)
        h = h.view(tiles, kp // 16, TILE, 4, 2, 2).permute(0, 2, 1, 4, 5, 3)
        q = q | h.reshape(np_, kp) << 4
    elif fmt != "Q4_K":
        h = torch.stack([(hi >> s) & 1 for s in range(8)], dim=-1)
        h = h.view(tiles, kp // 32, TILE, 4, 4, 2).permute(0, 2, 1, 4, 5, 3)
        q = q | h.reshape(np_, kp) << 4
    if fmt == "Q5":
        scale, low = _columns(packed.sc), _columns(packed.mn)
        return (q.float().view(np_, -1, 32) * scale[..., None] + low[..., None]).view(np_, kp)
    d = _columns(packed.d).repeat_interleave(SUPER // (kp // packed.sc.shape[1]), dim=1)
    sub = q.float().view(np_, packed.sc.shape[1], -1)
    if fmt == "Q6_K":
        return ((d * _columns(packed.sc))[..., None] * (sub - 32)).view(np_, kp)
    dmin = _columns(packed.dmin).repeat_interleave(8, dim=1)
    scale, low = d * _columns(packed.sc), dmin * _columns(packed.mn)
    return (scale[..., None] * sub - low[..., None]).view(np_, kp)


def call(packed: Packed) -> Call:
    return Call(packed[1:], packed.lo.shape[1] * 8, (LAYOUTS.index(packed.fmt),))


def fused(packed: Packed) -> Fused:  # the low nibbles: 8 inputs a row
    layout, padded = LAYOUTS.index(packed.fmt), packed.lo.shape[1] * 8
    return Fused(list(packed[1:]), layout, padded, 32, code_sums=packed.fmt == "Q6_K")


KERNEL = Kernel("kq", Packed, read, dequantize, call, 6, 1, fused=fused)
