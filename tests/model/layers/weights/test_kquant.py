"""K-quants (Q4_K, Q5_K, Q6_K) and Q5_0/Q5_1 run as the file has them: the blocks unpack to
``gguf``'s own numbers, every kernel path multiplies alike, and files with real files' mixes
load with nothing dequantized and score as their dequantized load."""

from __future__ import annotations

import logging
import shutil

import gguf
import numpy as np
import pytest
import torch
from tests.model.gguf.test_gguf_archs import PROMPTS, write_gguf
from tests.model.layers.weights.kquant_blocks import quantize

from llmkit import LLM, SamplingParams
from llmkit.kernels.cpu.loader import builds_here
from llmkit.model.demo import ModelSpec
from llmkit.model.gguf.cache import gguf_table
from llmkit.model.layers.native import NativeEmbedding, NativeLinear
from llmkit.model.layers.weights import kq
from llmkit.model.layers.weights.kernel import quantize_activations
from llmkit.model.layers.weights.kq import KERNEL
from llmkit.model.layers.weights.registry import FORMATS
from llmkit.model.names import resolve_model

TYPES = ["Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
# Rows of whole super-blocks of 256: the K formats' constraint (llama-quantize picks another
# type for a tensor whose rows are not).
SPECS = {
    arch: ModelSpec(
        architecture=arch, hidden_size=256, intermediate_size=512, tie_word_embeddings=tied
    )
    for arch, tied in (("llama", False), ("qwen2", True))
}


def q4_k_m(name: str) -> str:
    """llama-quantize's Q4_K_M, in small: Q4_K, with Q6_K for the head, and for attn_v and
    ffn_down on some layers (here layer 0), so layer 0's q, k, v mix two formats."""
    if name in ("output.weight", "token_embd.weight"):
        return "Q6_K" if name == "output.weight" else "Q4_K"
    if name.endswith(("attn_v.weight", "ffn_down.weight")) and name.startswith("blk.0."):
        return "Q6_K"
    return "F32" if "norm" in name or name.endswith(".bias") else "Q4_K"


def ud_mix(name: str) -> str:
    """A mix as Unsloth's dynamic files hold: Q4_K, Q5_K and Q6_K beside Q5_1, Q5_0, Q8_0."""
    parts = {"attn_q": "Q5_K", "attn_k": "Q5_1", "attn_v": "Q8_0", "attn_output": "Q5_0"}
    parts |= {"ffn_gate": "Q4_K", "ffn_up": "Q5_1", "ffn_down": "Q6_K", "token_embd": "Q8_0"}
    if "norm" in name or name.endswith(".bias"):
        return "F32"
    return "Q6_K" if name == "output.weight" else parts[name.split(".")[-2]]


def _blocks(qtype: str, rows: int = 21, k: int = 512) -> tuple[np.ndarray, np.ndarray]:
    weight = np.random.default_rng(1).standard_normal((rows, k)).astype(np.float32)
    return weight, quantize(weight, qtype)


@pytest.mark.parametrize("qtype", TYPES)
def test_unpacked_numbers_equal_gguf_dequantize_bit_for_bit(qtype):
    weight, blocks = _blocks(qtype)
    fmt = FORMATS[qtype]
    packed = fmt.read(torch.from_numpy(blocks), weight.shape[1])
    want = gguf.dequantize(blocks, gguf.GGMLQuantizationType[qtype]).reshape(weight.shape)
    assert np.array_equal(fmt.dequantize(packed)[: len(weight)].numpy(), want)
    ids = torch.tensor([20, 3, 3, 8, 0])  # an embedding lookup: rows of several tiles
    assert np.array_equal(fmt.rows(packed, ids).numpy(), want[ids.numpy()])


@pytest.mark.parametrize("qtype", TYPES)
def test_the_c_layout_equals_the_torch_one(qtype):
    if kq.load_packer() is None:
        pytest.skip("the kq kernel does not build here")
    weight, blocks = _blocks(qtype)
    ours = kq.read(qtype, torch.from_numpy(blocks), weight.shape[1])
    reference = kq.read_in_torch(qtype, torch.from_numpy(blocks), weight.shape[1])
    assert ours.fmt == reference.fmt
    for got, want in zip(ours[1:], reference[1:], strict=True):
        assert got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.parametrize("qtype", TYPES)
def test_every_kernel_path_equals_float64_and_the_others_to_the_bit(qtype):
    paths = builds_here(KERNEL.source, "kq_path")
    if not paths:
        pytest.skip("the kq kernel does not build here (no AVX2 or no compiler)")
    weight, blocks = _blocks(qtype, rows=37)
    packed = kq.read(qtype, torch.from_numpy(blocks), weight.shape[1])
    wide = kq.dequantize(packed)[:37].double()
    # a row, a pass of 4 and a tail, VNNI's and AVX2's first steps of many rows (kq_rows.h),
    # more than a row block of 64
    for rows in (1, 7, 8, 16, 32, 70):
        x = torch.randn(rows, weight.shape[1], generator=torch.Generator().manual_seed(rows)) * 3
        outs = {name: KERNEL.linear(x, packed, 37, KERNEL.load(f)) for name, f in paths.items()}
        first = next(iter(outs.values()))
        assert all(torch.equal(first, out) for out in outs.values()), list(outs)
        for flags in paths:  # each row alone in steps of 7: the tile path, whatever M picks
            kernel = KERNEL.load(flags)
            tiles = torch.cat(
                [KERNEL.linear(x[m : m + 7], packed, 37, kernel) for m in range(0, rows, 7)]
            )
            assert torch.equal(first, tiles), (flags, rows)
        codes, scale = quantize_activations(x)
        exact = (codes * scale).double() @ wide.T  # the kernel's products, summed in float64
        assert (first.double() - exact).abs().max() <= 1e-5 * exact.abs().max()
        reference = x.double() @ wide.T  # the activations' int8 rounding, at most
        assert (first.double() - reference).norm() <= 0.02 * reference.norm()


def _nll(llm: LLM) -> np.ndarray:
    out = llm.generate(PROMPTS, SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
    return -np.array(
        [
            entry[token].logprob
            for o in out
            for token, entry in zip(o.prompt_token_ids[1:], o.prompt_logprobs[1:], strict=True)
        ]
    )


@pytest.mark.parametrize(("arch", "mix"), [("llama", q4_k_m), ("qwen2", q4_k_m), ("llama", ud_mix)])
def test_a_mixed_file_loads_with_nothing_dequantized_and_scores_as_its_dequantized_load(
    arch, mix, model_factory, tmp_path, caplog
):
    file = write_gguf(model_factory(SPECS[arch]), tmp_path / f"{arch}.gguf", mix)
    with caplog.at_level(logging.INFO, logger="llmkit.model.gguf.native"):
        ours = LLM(str(file), max_model_len=128)
    assert "0 dequantized" in caplog.text, caplog.text
    model = ours._core.runner.model
    assert isinstance(model.model.embed_tokens, NativeEmbedding)
    layers = [m for m in model.model.layers.modules() if isinstance(m, NativeLinear)]
    assert len(layers) == 2 * 4 and isinstance(model.lm_head, NativeLinear)
    ours.generate([[1, 2, 3]], SamplingParams(max_tokens=4), use_tqdm=False)
    assert model.model.fused_decode._plan is not None  # the decode steps ran in the kernel
    weights = {t.untyped_storage().data_ptr(): t for t in model.state_dict(keep_vars=True).values()}
    held = sum(t.untyped_storage().nbytes() for t in weights.values())
    table = gguf_table(resolve_model(str(file)))
    assert table is not None
    assert held <= 1.1 * sum(t.nbytes for t in table.tensors.values())
    got, want = _nll(ours), _nll(LLM(str(file), dtype="float32", max_model_len=128))
    assert abs(got.mean() - want.mean()) < 0.05, (got.mean(), want.mean())


def test_a_fused_decode_step_of_40_rows_equals_its_layers_run_as_modules(model_factory, tmp_path):
    """40 decodes in one step: the fused kernel's K-quant matmuls take the path for many rows
    (kq_rows.h) and agree with the modules run 5 rows a step, on the tile path (to the
    RMSNorm's ~1e-3, see test_llama_fused)."""
    from llmkit.model.batch import SeqInput

    file = write_gguf(model_factory(SPECS["llama"]), tmp_path / "k.gguf", q4_k_m)
    llm = LLM(str(file), max_model_len=64, max_num_seqs=40)
    runner, rows = llm._core.runner, range(40)
    runner.execute([SeqInput([3 + r, 5 + r % 7, 9], 0, [r]) for r in rows])
    step = [SeqInput([11 + r], 3, [r]) for r in rows]
    fused = runner.model.model.fused_decode
    fused.enabled = False
    expected = torch.cat([runner.execute(step[r : r + 5]).clone() for r in rows[::5]])
    fused.enabled = True
    got = runner.execute(step)
    assert fused._plan is not None  # the kernel ran
    err = (got - expected).norm(dim=-1) / expected.norm(dim=-1)
    assert err.max().item() < 1e-2, err
    llm.close()


def _q2_k(name: str) -> str:
    return "Q2_K" if name.endswith("ffn_up.weight") else q4_k_m(name)


def test_a_type_without_a_kernel_still_serves_dequantized_and_is_named(
    model_factory, tmp_path, caplog, monkeypatch
):
    import tests.model.layers.weights.kquant_blocks as blocks

    def q2_k(weight: np.ndarray, qtype: str) -> np.ndarray:
        if qtype != "Q2_K":
            return quantize(weight, qtype)
        rows, k = weight.shape  # valid blocks with random codes: d and dmin small, positive
        b = np.random.default_rng(0).integers(0, 256, (rows * k // 256, 84), dtype=np.uint8)
        b[:, 80:84] = np.full((len(b), 2), 0.01, np.float16).view(np.uint8)
        return b.reshape(rows, -1)

    monkeypatch.setattr(blocks, "quantize", q2_k)
    monkeypatch.setattr("tests.model.gguf.test_gguf_archs.quantize", q2_k)
    file = write_gguf(model_factory(SPECS["llama"]), tmp_path / "q2.gguf", _q2_k)
    with caplog.at_level(logging.INFO, logger="llmkit.model.gguf.native"):
        llm = LLM(str(file), max_model_len=128)
    assert "no native kernel for Q2_K" in caplog.text and "blk.0.ffn_up.weight" in caplog.text
    out = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=3, ignore_eos=True), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 3


def test_a_file_too_big_to_dequantize_fails_before_loading_with_both_sizes(
    model_factory, tmp_path, monkeypatch
):
    file = write_gguf(model_factory(SPECS["llama"]), tmp_path / "k.gguf", q4_k_m)
    monkeypatch.setattr("llmkit.model.gguf.native.available_memory", lambda: 1 << 20)
    with pytest.raises(ValueError, match=r"need \d+\.\d+ GiB .* has 0\.00 GiB available"):
        LLM(str(file), dtype="float32")


def test_a_truncated_k_quant_tensor_fails_naming_it_and_the_file(model_factory, tmp_path):
    file = write_gguf(model_factory(SPECS["llama"]), tmp_path / "k.gguf", q4_k_m)
    reader = gguf.GGUFReader(file)
    last = max(
        (t for t in reader.tensors if t.tensor_type.name == "Q4_K"), key=lambda t: t.data_offset
    )
    cut = tmp_path / "cut.gguf"
    shutil.copy(file, cut)
    with cut.open("r+b") as f:
        f.truncate(int(last.data_offset) + int(last.n_bytes) // 2)
    with pytest.raises(ValueError, match=rf"{cut}.*{last.name}"):
        LLM(str(cut))


def test_a_second_load_maps_the_packed_weights_the_first_kept(model_factory, tmp_path, monkeypatch):
    file = write_gguf(model_factory(SPECS["qwen2"]), tmp_path / "kept.gguf", ud_mix)
    first = LLM(str(file), max_model_len=128)
    want = _nll(first)
    first.close()

    def relayout(*args):
        raise AssertionError("a second load re-laid a tensor's blocks")

    monkeypatch.setattr("llmkit.model.layers.weights.registry.WeightFormat.read", relayout)
    again = LLM(str(file), max_model_len=128)
    np.testing.assert_array_equal(_nll(again), want)
