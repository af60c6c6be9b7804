"""A reference quantizer for the K-quants, written for the tests: the gguf package dequantizes
every type but quantizes only the legacy ones. It makes valid blocks of Q4_K, Q5_K and Q6_K
(llama.cpp's layouts) from float rows; its choice of scales is simpler than llama.cpp's
search, but every block it writes is one llama.cpp could have written."""

from __future__ import annotations

import gguf
import numpy as np

QK = 256


def quantize(weight: np.ndarray, qtype: str) -> np.ndarray:
    """``weight`` ``[rows, k]`` float32 as GGUF blocks of ``qtype`` (uint8 rows), any type."""
    if qtype not in _WRITERS:
        return gguf.quantize(weight, gguf.GGMLQuantizationType[qtype])
    rows, k = weight.shape
    blocks = weight.astype(np.float32).reshape(rows * k // QK, QK)
    return _WRITERS[qtype](blocks).reshape(rows, -1)


def _f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).reshape(-1, 1).view(np.uint8)


def _scaled(x: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``x`` ``[n, s]`` (>= 0): a float16 ``d`` and integers ``round(x / d)`` in
    0..top, with d chosen so the largest reaches ``top``."""
    d = (x.max(axis=-1) / top).astype(np.float16)
    inv = np.where(d > 0, 1 / np.maximum(d.astype(np.float32), 1e-30), 0)
    return d, np.clip(np.rint(x * inv[:, None]), 0, top).astype(np.uint8)


def _k45(blocks: np.ndarray, bits: int) -> np.ndarray:
    n, top = blocks.shape[0], (1 << bits) - 1
    sub = blocks.reshape(n, 8, 32)
    mins = -np.minimum(sub.min(axis=-1), 0)
    scales = (sub.max(axis=-1) + mins) / top
    d, sc = _scaled(scales, 63)
    dmin, m = _scaled(mins, 63)
    step = (d.astype(np.float32)[:, None] * sc)[..., None]
    low = (dmin.astype(np.float32)[:, None] * m)[..., None]
    q = np.where(step > 0, np.rint((sub + low) / np.where(step > 0, step, 1)), 0)
    q = np.clip(q, 0, top).astype(np.uint8)  # [n, 8, 32]
    packed = np.concatenate(
        [
            sc[:, :4] | (sc[:, 4:] >> 4) << 6,
            m[:, :4] | (m[:, 4:] >> 4) << 6,
            (sc[:, 4:] & 15) | (m[:, 4:] & 15) << 4,
        ],
        axis=-1,
    )
    qs = (q[:, 0::2] & 15) | (q[:, 1::2] & 15) << 4  # sub-blocks 2j and 2j + 1 share bytes
    parts = [_f16(d), _f16(dmin), packed]
    if bits == 5:  # bit i of byte l: sub-block i's input l
        parts.append(sum((q[:, i] >> 4) << i for i in range(8)).astype(np.uint8))
    return np.concatenate([*parts, qs.reshape(n, 128)], axis=-1)


def _k6(blocks: np.ndarray) -> np.ndarray:
    n = blocks.shape[0]
    sub = blocks.reshape(n, 16, 16)
    per = np.abs(sub).max(axis=-1) / 31
    d = (per.max(axis=-1) / 127).astype(np.float16)
    inv = np.where(d > 0, 1 / np.maximum(d.astype(np.float32), 1e-30), 0)
    sc = np.clip(np.rint(per * inv[:, None]), 1, 127).astype(np.int8)
    step = (d.astype(np.float32)[:, None] * sc)[..., None]
    q = (np.clip(np.rint(sub / step), -32, 31) + 32).astype(np.uint8).reshape(n, 2, 128)
    ql = (q[:, :, :64] & 15) | (q[:, :, 64:] & 15) << 4  # [n, half, 64]
    qh = sum(((q[:, :, 32 * i : 32 * i + 32] >> 4) & 3) << 2 * i for i in range(4))
    return np.concatenate(
        [ql.reshape(n, 128), qh.astype(np.uint8).reshape(n, 64), sc.view(np.uint8), _f16(d)],
        axis=-1,
    )


_WRITERS = {"Q4_K": lambda b: _k45(b, 4), "Q5_K": lambda b: _k45(b, 5), "Q6_K": _k6}
