"""The C kernels a model on CPU may run, compiled (first start) or found built, together.

Each build is a compiler process of its own (3-5 s apiece at -O3 on two cores): started from
threads as the engine starts, they overlap each other and the first start's reading of a
GGUF file's metadata and tokenizer, rather than each waiting for the layer that needs it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from llmkit.model.attention import paged_decode_cpu
from llmkit.model.layers import gated_delta_cpu
from llmkit.model.layers.weights import kq, mxfp4, q8, w4a8
from llmkit.model.models import llama_fused

_LOADS = (
    w4a8.KERNEL.load,
    q8.KERNEL.load,
    kq.KERNEL.load,
    mxfp4.KERNEL.load,
    llama_fused.load,
    paged_decode_cpu.load,
    gated_delta_cpu.load,
)
# The builds of this process, started once (each load is cached for the process anyway).
_builds: list[Future] = []
_lock = threading.Lock()


def start_cpu_kernel_builds() -> None:
    """Start building (or finding) every kernel in the background; once per process."""
    with _lock:
        if not _builds:
            pool = ThreadPoolExecutor(len(_LOADS), thread_name_prefix="llmkit-kernel-build")
            _builds.extend(pool.submit(load) for load in _LOADS)
            pool.shutdown(wait=False)


def build_cpu_kernels() -> None:
    """Every kernel built (or found); one that cannot be built leaves its torch path."""
    start_cpu_kernel_builds()
    for build in _builds:
        build.result()
