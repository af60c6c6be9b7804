"""The q8 C kernel, on every instruction path this CPU can run, against a float64 reference
of the same quantized math; the embedding rows and the Q8_0 reading against the gguf package.

The reference takes the activation codes and block scales from ``quantize_activations`` (the
kernel's float operations) and the weight from ``dequantize``, and sums in float64: what
remains is the kernel's float32 accumulation, ~1e-6 of the output's scale. A wrong layout,
block or scale would be off by O(1).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmkit.kernels.cpu.build import PATHS
from llmkit.kernels.cpu.loader import builds_here
from llmkit.model.layers.weights import q8
from llmkit.model.layers.weights.kernel import quantize_activations

WIDEST = q8.KERNEL.path()
needs_kernel = pytest.mark.skipif(WIDEST is None, reason="no C compiler / AVX2 here")


def _builds() -> list[tuple[str, str]]:
    """Each path this CPU runs, with the flags that build it."""
    return sorted(builds_here(q8.KERNEL.source, "q8_path").items())


def test_every_path_the_cpu_has_is_built():
    missing = [p for p in PATHS if p not in dict(_builds())]
    if missing:  # say which paths this run cannot check, rather than pass in silence
        print(f"q8 kernel paths this CPU lacks (not checked here): {', '.join(missing)}")
    assert WIDEST is None or "avx2" in dict(_builds())


def reference(x: torch.Tensor, packed: q8.Packed, n: int) -> torch.Tensor:
    codes, scale = quantize_activations(x.float())
    weight = q8.dequantize(packed)[:n, : x.shape[1]]
    return (codes.double() * scale.double()) @ weight.double().T


@needs_kernel
@pytest.mark.parametrize("build", _builds(), ids=lambda b: b[0])
@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 70),
    n=st.integers(1, 45),
    k=st.integers(1, 200),
    threads=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_kernel_equals_the_reference(build, rows, n, k, threads, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=g) * 3
    packed = q8.pack(torch.randn(n, k, generator=g))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = q8.KERNEL.linear(x, packed, n, q8.KERNEL.load(build[1]))
    finally:
        torch.set_num_threads(previous)
    want = reference(x, packed, n)
    error = ((got.double() - want).abs().max() / want.abs().max().clamp(min=1e-30)).item()
    assert error < 1e-5


def test_q8_0_blocks_read_as_the_gguf_package_dequantizes_them():
    from gguf import GGMLQuantizationType, dequantize, quantize

    w = np.random.default_rng(0).standard_normal((13, 96)).astype(np.float32)
    blocks = quantize(w, GGMLQuantizationType.Q8_0)
    packed = q8.from_q8_0(torch.from_numpy(blocks), 96)
    want = dequantize(blocks, GGMLQuantizationType.Q8_0)
    torch.testing.assert_close(q8.dequantize(packed)[:13], torch.from_numpy(want), rtol=0, atol=0)
    ids = torch.tensor([12, 0, 7, 8, 12])
    torch.testing.assert_close(q8.rows(packed, ids), torch.from_numpy(want)[ids], rtol=0, atol=0)


def test_torch_path_equals_the_reference():
    g = torch.Generator().manual_seed(1)
    x, packed = torch.randn(5, 70, generator=g), q8.pack(torch.randn(11, 70, generator=g))
    got = q8.KERNEL.linear_in_torch(x, packed, 11)
    torch.testing.assert_close(got.double(), reference(x, packed, 11), rtol=1e-5, atol=1e-5)
