"""The w4a8 C kernel against a float64 reference of the same quantized math, and its torch
fallback where no compiler is present.

The reference takes the activation codes and their block scales from ``quantize_activations`` (the
kernel's float operations, so the same codes) and the weight from ``dequantize`` (the packed
codes, scales and mins), and sums in float64. What remains between the two is the kernel's
float32 accumulation: under 1e-6 of the size of its terms (|codes| |w| summed), however much
they cancel. A wrong layout, a dropped
block, a wrong zero-point or scale would be off by O(1) relative.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmkit.kernels.cpu import loader
from llmkit.kernels.cpu.build import PATHS
from llmkit.kernels.cpu.loader import builds_here
from llmkit.model.layers.weights import w4a8
from llmkit.model.layers.weights.kernel import quantize_activations

needs_kernel = pytest.mark.skipif(w4a8.KERNEL.load() is None, reason="no C compiler / AVX2 here")
BUILDS = sorted(builds_here(w4a8.KERNEL.source, "w4a8_path").items())


def test_every_path_the_cpu_has_is_built():
    missing = [p for p in PATHS if p not in dict(BUILDS)]
    if missing:  # say which paths this run cannot check, rather than pass in silence
        print(f"w4a8 kernel paths this CPU lacks (not checked here): {', '.join(missing)}")
    assert w4a8.KERNEL.load() is None or "avx2" in dict(BUILDS)


class Reference(NamedTuple):
    """The kernel's math in float64, and the size of its terms (``|codes| |w|``): what a
    float32 sum's rounding scales with, however much the terms cancel."""

    exact: torch.Tensor
    terms: torch.Tensor


def reference(x: torch.Tensor, packed: w4a8.Packed, n: int) -> Reference:
    codes, scale = quantize_activations(x.float())
    activations = codes.double() * scale.double()
    weight = w4a8.dequantize(packed)[:n, : x.shape[1]].double()
    return Reference(activations @ weight.T, activations.abs() @ weight.abs().T)


def relative_error(got: torch.Tensor, want: Reference) -> float:
    """The largest error over the largest sum of terms' sizes (a one-output case whose
    terms cancel to 1e-3 of their size must not need 1e-8 of float32's 1e-7)."""
    error = (got.double() - want.exact).abs().max()
    return (error / want.terms.max().clamp(min=1e-30)).item()


@needs_kernel
@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b[0])
@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 70),
    n=st.integers(1, 45),
    k=st.integers(1, 300),
    group=st.sampled_from([32, 64, 128, 256]),
    threads=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_kernel_matches_the_quantized_math(build, rows, n, k, group, threads, seed):
    """Any shape: M = 1, M not a multiple of the 4-row pass, odd N (a partial 8-column
    tile), K not a multiple of 8, 32 or the group (zero-padded), more threads than tiles;
    on each instruction path this CPU has (they sum the same integers: equal to the bit)."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen)
    x = torch.randn(rows, k, generator=gen) * 3
    packed = w4a8.pack(weight, w4a8.group_for(k, group))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = w4a8.KERNEL.linear(x, packed, n, w4a8.KERNEL.load(build[1]))
        widest = w4a8.KERNEL.linear(x, packed, n)
    finally:
        torch.set_num_threads(previous)
    assert got.shape == (rows, n) and got.dtype == torch.float32
    assert torch.equal(got, widest)
    assert relative_error(got, reference(x, packed, n)) < 1e-6


@needs_kernel
def test_kernel_on_the_benchmark_shapes():
    torch.manual_seed(0)
    for rows, n, k in [(1, 1536, 1024), (32, 5632, 1024), (33, 1024, 2816)]:
        weight, x = torch.randn(n, k) * 0.05, torch.randn(rows, k)
        packed = w4a8.pack(weight, 128)
        assert relative_error(w4a8.KERNEL.linear(x, packed, n), reference(x, packed, n)) < 1e-6


def test_zero_rows_and_zero_activations():
    packed = w4a8.pack(torch.randn(16, 64), 32)
    assert w4a8.KERNEL.linear(torch.empty(0, 64), packed, 16).shape == (0, 16)
    assert torch.equal(w4a8.KERNEL.linear(torch.zeros(3, 64), packed, 16), torch.zeros(3, 16))


def test_packing_round_trips_within_half_a_step():
    """Dequantized codes sit within half a quantization step (plus float16's rounding of
    the scale and min) of the weight; the padding is cut off."""
    torch.manual_seed(0)
    weight = torch.randn(19, 100)
    packed = w4a8.pack(weight, 32)
    assert packed.codes.shape == (3, 128 // 8, 32) and packed.scales.shape == (3, 4, 8)
    back = w4a8.dequantize(packed)[:19, :100]
    step = (weight.view(19, -1).amax(1) - weight.amin(1)).max() / 15
    assert (back - weight).abs().max() < 0.5 * step + 1e-2
    # 5 bits a weight: the codes, and a float16 scale and min per group of 32.
    bits = sum(t.numel() * t.element_size() for t in packed) * 8 / (24 * 128)
    assert bits == pytest.approx(4 + 32 / 32)


@pytest.mark.parametrize(("n", "k"), [(19, 96), (192, 576), (8, 32)])
def test_q4_1_rows_become_the_same_weights_unrequantized(n, k):
    """llama.cpp's Q4_1 (a GGUF file's 4-bit type) is a w4a8 group of 32: the packed weight
    dequantizes to exactly the file's numbers, and the kernel multiplies by them."""
    gguf = pytest.importorskip("gguf")
    torch.manual_seed(0)
    weight = torch.randn(n, k) * torch.rand(n, 1)
    blocks = gguf.quantize(weight.numpy(), gguf.GGMLQuantizationType.Q4_1)
    file_numbers = torch.from_numpy(gguf.dequantize(blocks, gguf.GGMLQuantizationType.Q4_1))
    packed = w4a8.from_q4_1(torch.from_numpy(blocks), k)
    assert torch.equal(w4a8.dequantize(packed)[:n], file_numbers)
    assert not w4a8.dequantize(packed)[n:].any()  # the padding rows
    x = torch.randn(5, k)
    assert relative_error(w4a8.KERNEL.linear(x, packed, n), reference(x, packed, n)) < 1e-6


def test_without_a_compiler_torch_runs_the_same_math(monkeypatch, tmp_path):
    """No C compiler (or a broken one): load() says so and linear() takes the torch path,
    which gives the kernel's numbers up to float rounding."""
    torch.manual_seed(0)
    weight, x = torch.randn(37, 200), torch.randn(9, 200)
    packed = w4a8.pack(weight, 64)
    kernel = w4a8.KERNEL.linear(x, packed, 37)
    w4a8.KERNEL.load.cache_clear()
    monkeypatch.setattr(loader, "PREBUILT", tmp_path)  # none built at install either
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    try:
        assert w4a8.KERNEL.load() is None
        fallback = w4a8.KERNEL.linear(x, packed, 37)
    finally:
        w4a8.KERNEL.load.cache_clear()
    want = reference(x, packed, 37)
    assert relative_error(fallback, want) < 1e-6
    assert relative_error(kernel, want) < 1e-6


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1"])
def test_gguf_q4_blocks_read_as_the_gguf_package_dequantizes_them(qtype):
    import numpy as np
    from gguf import GGMLQuantizationType, dequantize, quantize

    kind = GGMLQuantizationType[qtype]
    w = np.random.default_rng(0).standard_normal((13, 96)).astype(np.float32)
    blocks = quantize(w, kind)
    read = {"Q4_0": w4a8.from_q4_0, "Q4_1": w4a8.from_q4_1}[qtype]
    got = w4a8.dequantize(read(torch.from_numpy(blocks), 96))[:13]
    torch.testing.assert_close(got, torch.from_numpy(dequantize(blocks, kind)), rtol=0, atol=0)
