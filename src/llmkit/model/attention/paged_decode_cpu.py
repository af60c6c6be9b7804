"""Decode attention straight from the paged cache on CPU: a small C kernel, built on first use.

The torch path gathers each decode group's K/V out of the cache into a padded copy and runs
SDPA over it: three passes over the context's bytes (read, write, read) and SDPA's flash
kernel, which is slow at one query. ``csrc/paged_decode.c`` reads each request's keys and
values once through its block table (float32; one POSIX thread per torch thread). It is
compiled with the system C compiler (``$CC``, else ``cc``) for this CPU (``-march=native``)
into ``~/.cache/llmkit/kernels``, keyed by the source, the flags, the compiler and the CPU's
feature flags; with no compiler, or if the build or load fails, :func:`load` returns None
and the torch path runs instead, as before.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("csrc") / "paged_decode.c"
# Not -ffast-math: linking with it adds crtfastmath, which sets flush-to-zero for the whole
# process when the library loads. These let the dot products vectorize and change nothing
# outside the kernel.
FLAGS = (
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fPIC",
    "-shared",
    "-pthread",
)
_I64, _P = ctypes.c_int64, ctypes.c_void_p


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return ""


def _build(compiler: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        subprocess.run(
            [compiler, *FLAGS, str(SOURCE), "-o", str(built), "-lm"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        os.replace(built, target)  # atomic: a concurrent build never loads half a file


@functools.cache
def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None where it cannot be built or loaded here."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not SOURCE.exists():
        return None
    try:
        version = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
        key = hashlib.sha256(
            SOURCE.read_bytes() + "\0".join([*FLAGS, version, _cpu_flags()]).encode()
        ).hexdigest()[:16]
        target = Path.home() / ".cache" / "llmkit" / "kernels" / f"paged_decode-{key}.so"
        if not target.exists():
            _build(compiler, target)
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("CPU decode-attention kernel unavailable, using torch ops: %s", exc)
        return None
    lib.paged_decode_f32.restype = ctypes.c_int
    lib.paged_decode_f32.argtypes = [_P] * 8 + [_I64] * 6 + [ctypes.c_float, _I64]
    return lib


def paged_decode(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    reqs: torch.Tensor,
    rows: torch.Tensor,
    out: torch.Tensor,
    scale: float,
) -> None:
    """``out[rows[i]]`` = attention of ``query[rows[i]]`` over request ``reqs[i]``'s context.

    ``query``/``out`` ``[T, H, D]``, caches ``[blocks, block_size, H_kv, D]``,
    ``block_tables`` ``[B, W]`` and ``seq_lens`` ``[B]`` int32, ``reqs``/``rows`` int64.
    """
    lib = load()
    assert lib is not None
    for tensors, dtype in (
        ((query, k_cache, v_cache, out), torch.float32),
        ((block_tables, seq_lens), torch.int32),
        ((reqs, rows), torch.int64),
    ):
        if not all(t.dtype == dtype and t.is_contiguous() and t.is_cpu for t in tensors):
            raise ValueError("paged_decode takes contiguous CPU tensors of the documented dtypes")
    block_size, num_kv_heads, head_dim = k_cache.shape[1:]
    status = lib.paged_decode_f32(
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
        scale,
        torch.get_num_threads(),
    )
    if status != 0:
        raise MemoryError("the CPU decode-attention kernel ran out of memory")
