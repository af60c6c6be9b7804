"""The MXFP4 C kernel, on every instruction path this CPU can run, against a float64 reference
of the same quantized math; the reading of a file's blocks against the gguf package; the
torch path; MXFP4 weights in a native layer and in a GGUF file.

The blocks are built here from random codes and exponents (every one of both in the read
test), so the numbers checked are all the format can hold, not only what a quantizer picks.
The reference takes the activation codes and block scales from ``quantize_activations`` (the
kernel's float operations) and the weight from ``dequantize``, and sums in float64: what
remains is the kernel's float32 accumulation, ~1e-6 of the output's scale. A wrong layout,
nibble, sign or exponent would be off by O(1).
"""

from __future__ import annotations

import logging

import gguf
import numpy as np
import pytest
import torch

from llmkit import LLM, SamplingParams
from llmkit.kernels.cpu.build import PATHS
from llmkit.kernels.cpu.loader import builds_here
from llmkit.model.layers.native import NativeLinear, Part
from llmkit.model.layers.weights import mxfp4
from llmkit.model.layers.weights.kernel import quantize_activations
from llmkit.model.layers.weights.mxfp4 import KERNEL
from llmkit.model.layers.weights.registry import FORMATS
from llmkit.model.models import llama_fused

WIDEST = KERNEL.path()
needs_kernel = pytest.mark.skipif(WIDEST is None, reason="no C compiler / AVX2 here")
MXFP4 = gguf.GGMLQuantizationType.MXFP4


def _builds() -> list[tuple[str, str]]:
    """Each path this CPU runs, with the flags that build it."""
    return sorted(builds_here(KERNEL.source, "mxfp4_path").items())


def blocks(rows: int, k: int, seed: int, exponents: tuple[int, int] = (114, 124)) -> np.ndarray:
    """Random MXFP4 rows (uint8 ``[rows, k / 32 * 17]``): exponents in ``[low, high)``, codes
    anywhere in 0..15. The default exponents give weights up to 12 * 2**-5, as a model's."""
    rng = np.random.default_rng(seed)
    e = rng.integers(*exponents, (rows, k // 32, 1), dtype=np.uint8)
    qs = rng.integers(0, 256, (rows, k // 32, 16), dtype=np.uint8)
    return np.concatenate([e, qs], axis=-1).reshape(rows, -1)


def reference(x: torch.Tensor, packed: mxfp4.Packed, n: int) -> torch.Tensor:
    codes, scale = quantize_activations(x.float())
    weight = mxfp4.dequantize(packed)[:n, : x.shape[1]]
    return (codes.double() * scale.double()) @ weight.double().T


def test_every_path_the_cpu_has_is_built():
    missing = [p for p in PATHS if p not in dict(_builds())]
    if missing:  # say which paths this run cannot check, rather than pass in silence
        print(f"mxfp4 kernel paths this CPU lacks (not checked here): {', '.join(missing)}")
    assert WIDEST is None or "avx2" in dict(_builds())


def test_blocks_read_as_the_gguf_package_dequantizes_them_bit_for_bit():
    # Every exponent (the subnormal scales of 0 and 1 and 2**127 of 255) and every code.
    b = blocks(21, 256 * 32, seed=0, exponents=(0, 256))
    b[:, ::17] = np.arange(21 * 256, dtype=np.uint8).reshape(21, 256)
    packed = FORMATS["MXFP4"].read(torch.from_numpy(b), 256 * 32)
    with np.errstate(over="ignore"):  # 12 * 2**127 is infinite, here as in the kernel
        want = gguf.dequantize(b, MXFP4).reshape(21, -1)
    got = mxfp4.dequantize(packed)
    assert got.shape == (24, 256 * 32)  # whole tiles of 8 rows
    assert np.array_equal(got[:21].numpy().view(np.uint32), want.view(np.uint32))
    assert not got[21:].any()  # the padding rows weigh nothing
    ids = torch.tensor([20, 3, 3, 8, 0])  # an embedding lookup: rows of several tiles
    rows = FORMATS["MXFP4"].rows(packed, ids).numpy()
    assert np.array_equal(rows.view(np.uint32), want[ids.numpy()].view(np.uint32))


def test_the_format_is_registered_at_its_size():
    fmt = FORMATS["MXFP4"]
    assert fmt.bits_per_weight == 4.25
    packed = fmt.read(torch.from_numpy(blocks(16, 2048, seed=1)), 2048)
    assert isinstance(packed, fmt.kernel.packed)
    held = sum(t.numel() * t.element_size() for t in packed)
    assert held == 16 * 2048 * 4.25 / 8  # kept as the file has it, not widened


def test_rows_of_partial_blocks_are_refused():
    with pytest.raises(ValueError, match="whole blocks of 32, got 48"):
        mxfp4.from_mxfp4(torch.zeros(8, 34, dtype=torch.uint8), 48)


@needs_kernel
@pytest.mark.parametrize("build", _builds(), ids=lambda b: b[0])
@pytest.mark.parametrize("rows", [1, 7, 8, 16, 70])  # a row, a tail, passes of 4, > 64 rows
@pytest.mark.parametrize(("n", "k"), [(8, 32), (13, 96), (45, 256), (64, 160)])
def test_kernel_equals_the_reference(build, rows, n, k):
    g = torch.Generator().manual_seed(rows * n + k)
    x = torch.randn(rows, k, generator=g) * 3
    packed = mxfp4.from_mxfp4(torch.from_numpy(blocks(n, k, seed=rows + n)), k)
    previous = torch.get_num_threads()
    torch.set_num_threads(1 + rows % 3)
    try:
        got = KERNEL.linear(x, packed, n, KERNEL.load(build[1]))
    finally:
        torch.set_num_threads(previous)
    want = reference(x, packed, n)
    assert got.shape == (rows, n)
    assert (got.double() - want).abs().max() <= 1e-6 * want.abs().max()


@needs_kernel
def test_every_path_gives_the_same_floats():
    """The integer dot products are exact on each path, and the floats made of them alike."""
    x = torch.randn(9, 320, generator=torch.Generator().manual_seed(2)) * 3
    packed = mxfp4.from_mxfp4(torch.from_numpy(blocks(27, 320, seed=3)), 320)
    outs = {name: KERNEL.linear(x, packed, 27, KERNEL.load(flags)) for name, flags in _builds()}
    first = next(iter(outs.values()))
    assert all(torch.equal(first, out) for out in outs.values()), list(outs)


def test_activations_of_one_sign_meet_the_offset_exactly():
    """All-positive activations make the offset's correction (12 times the codes' sum) as
    large as it gets: the sums must still come out exact, so only float rounding remains."""
    x = torch.rand(5, 128, generator=torch.Generator().manual_seed(4)) + 1
    packed = mxfp4.from_mxfp4(torch.from_numpy(blocks(16, 128, seed=5)), 128)
    want = reference(x, packed, 16)
    assert (KERNEL.linear(x, packed, 16).double() - want).abs().max() <= 1e-6 * want.abs().max()


def test_torch_path_equals_the_kernel():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(7, 96, generator=g)
    packed = mxfp4.from_mxfp4(torch.from_numpy(blocks(11, 96, seed=7)), 96)
    got = KERNEL.linear_in_torch(x, packed, 11)
    torch.testing.assert_close(got.double(), reference(x, packed, 11), rtol=1e-5, atol=1e-6)
    if WIDEST is not None:
        torch.testing.assert_close(got, KERNEL.linear(x, packed, 11), rtol=1e-5, atol=1e-6)


def test_a_native_linear_stacks_an_mxfp4_part_beside_another_format():
    k = 64
    fmt, q8_0 = FORMATS["MXFP4"], FORMATS["Q8_0"]
    w8 = np.random.default_rng(8).standard_normal((5, k)).astype(np.float32) * 0.1
    b8 = gguf.quantize(w8, gguf.GGMLQuantizationType.Q8_0)
    parts = [
        Part(fmt, fmt.read(torch.from_numpy(blocks(12, k, seed=9)), k), 12),
        Part(q8_0, q8_0.read(torch.from_numpy(b8), k), 5),
    ]
    bias = torch.nn.Parameter(torch.randn(17))
    layer = NativeLinear(parts, k, 17, bias)
    x = torch.randn(2, 3, k, generator=torch.Generator().manual_seed(10))
    got = layer(x)
    codes, scale = quantize_activations(x.reshape(-1, k))
    want = (codes * scale).double() @ layer.dequantized().double().T + bias.double()
    assert got.shape == (2, 3, 17)
    torch.testing.assert_close(got.reshape(-1, 17).double(), want, rtol=1e-5, atol=1e-5)
    assert "MXFP4+Q8_0" in repr(layer)


def _mlp_in_mxfp4(name: str) -> str:
    """gpt-oss's file in small: the MLP in MXFP4, the rest Q8_0, norms float32."""
    if "norm" in name or name.endswith(".bias"):
        return "F32"
    return "MXFP4" if ".ffn_" in name else "Q8_0"


@pytest.fixture(scope="module")
def mxfp4_file(model_factory, tmp_path_factory) -> str:
    from tests.model.gguf.test_gguf_archs import write_gguf

    out = tmp_path_factory.mktemp("mxfp4") / "mlp-mxfp4.gguf"
    return str(write_gguf(model_factory("llama"), out, _mlp_in_mxfp4))


def test_a_file_with_mxfp4_layers_loads_them_as_they_are_and_scores_as_dequantized(
    mxfp4_file, caplog
):
    from tests.model.gguf.test_gguf_archs import PROMPTS

    with caplog.at_level(logging.INFO, logger="llmkit.model.gguf.native"):
        ours = LLM(mxfp4_file, max_model_len=128)
    assert "0 dequantized" in caplog.text and "MXFP4" in caplog.text, caplog.text
    mlps = [layer.mlp for layer in ours._core.runner.model.model.layers]
    assert all(repr(m.gate_up_proj).endswith("MXFP4+MXFP4)") for m in mlps)
    assert all(repr(m.down_proj).endswith("MXFP4)") for m in mlps)

    def nll(llm: LLM) -> float:
        params = SamplingParams(max_tokens=1, prompt_logprobs=0)
        out = llm.generate(PROMPTS, params, use_tqdm=False)
        logprobs = [
            entry[token].logprob
            for o in out
            for token, entry in zip(o.prompt_token_ids[1:], o.prompt_logprobs[1:], strict=True)
        ]
        return -float(np.mean(logprobs))

    got, want = nll(ours), nll(LLM(mxfp4_file, dtype="float32", max_model_len=128))
    assert abs(got - want) < 0.05, (got, want)


@pytest.mark.skipif(llama_fused.load() is None, reason="the fused decode kernel does not build")
def test_the_fused_decode_step_runs_mxfp4_layers_as_their_modules_do(mxfp4_file):
    """As test_llama_fused's: four requests' decode rows through the kernel, against the same
    step with the kernel off (the kernel's RMSNorm sums in another order: ~1e-3 apart)."""
    from tests.model.models.test_llama_fused import kernel_against_modules

    llm = LLM(mxfp4_file, max_model_len=64, max_num_seqs=4)
    err = kernel_against_modules(llm._core.runner)
    assert err.max().item() < 1e-2, err
    llm.close()
