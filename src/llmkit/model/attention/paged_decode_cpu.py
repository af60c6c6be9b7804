"""Decode attention straight from the paged cache on CPU: a small C kernel.

The torch path gathers each decode group's K/V out of the cache into a padded copy and runs
SDPA over it: three passes over the context's bytes (read, write, read) and SDPA's flash
kernel, which is slow at one query. ``kernels/cpu/paged_decode.c`` reads each request's keys and
values once through its block table (float32; on torch's OpenMP threads). It is loaded for
this CPU by :mod:`llmkit.kernels.cpu.loader`; where it cannot be had (no prebuilt library and
no compiler, or the load fails), :func:`load` returns None and the torch path runs instead.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

import torch

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.loader import load_function
from llmkit.model.attention.base import AttentionSpec

SOURCE = SOURCES / "paged_decode.c"
_I64, _P = ctypes.c_int64, ctypes.c_void_p
KV_DTYPES = (torch.float32, torch.float16)  # the caches the kernel reads


@functools.cache
def load() -> Callable[..., int] | None:
    """The compiled kernel, or None where it cannot be built or loaded here."""
    argtypes = [_P] * 8 + [_I64] * 7 + [ctypes.c_float, _I64, ctypes.c_float, _P, _I64, _I64]
    return load_function(SOURCE, "paged_decode_f32", argtypes)


def paged_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    reqs: torch.Tensor,
    rows: torch.Tensor,
    out: torch.Tensor,
    spec: AttentionSpec,
) -> None:
    """``out[rows[i]]`` = attention of ``query[rows[i]]`` over request ``reqs[i]``'s context,
    as ``spec`` says (its window, soft-cap and sinks).

    ``query``/``out`` ``[T, H, D]``, caches ``[blocks, block_size, H_kv, D]`` (float32 or
    float16; each block contiguous, blocks perhaps further apart: ``model/kv_layout.py``),
    ``block_tables`` ``[B, W]`` and ``seq_lens`` ``[B]`` int32, ``reqs``/``rows`` int64.
    """
    kernel = load()
    assert kernel is not None
    for tensors, dtype in (
        ((query, out), torch.float32),
        ((k_cache, v_cache), k_cache.dtype if k_cache.dtype in KV_DTYPES else torch.float32),
        ((block_tables, seq_lens), torch.int32),
        ((reqs, rows), torch.int64),
    ):
        if not all(t.dtype == dtype and _contiguous(t) and t.is_cpu for t in tensors):
            raise ValueError("paged_decode takes contiguous CPU tensors of the documented dtypes")
    block_size, num_kv_heads, head_dim = k_cache.shape[1:]
    sinks = None if spec.sinks is None else spec.sinks.float().contiguous()
    status = kernel(
        query.data_ptr(),
        k_cache.data_ptr(),
        v_cache.data_ptr(),
        block_tables.data_ptr(),
        seq_lens.data_ptr(),
        reqs.data_ptr(),
        rows.data_ptr(),
        out.data_ptr(),
        reqs.shape[0],
        block_tables.shape[1],
        block_size,
        query.shape[1],
        num_kv_heads,
        head_dim,
        k_cache.stride(0),
        spec.scale,
        spec.window or 0,
        spec.softcap or 0.0,
        None if sinks is None else sinks.data_ptr(),
        k_cache.dtype == torch.float16,
        torch.get_num_threads(),
    )
    if status != 0:
        raise MemoryError("the CPU decode-attention kernel ran out of memory")


def _contiguous(t: torch.Tensor) -> bool:
    """Contiguous, or a KV cache whose blocks are (the pages of a shared pool)."""
    return t.is_contiguous() or (t.dim() == 4 and t[0].is_contiguous())
