"""int8 / int4 weight-only, w8a8 and w4a8: the accuracy cost against float32, and serving.

The reference is llmkit's own float32 model, which the HF parity tests hold to HF token for
token. Each quantized model scores float32's greedy sequences (prompt logprobs, teacher
forced), so every position is compared on the same context:
- the logprob of float32's token: max and mean absolute difference;
- the top-1 token: the share of positions where the quantized model's equals float32's.

Bounds, measured on the four test models (llama, mistral, qwen2, qwen3), activations in
bfloat16 as the kernels take them: int8's max difference is 0.047..0.065, its mean
0.012..0.013 and its top-1 agreement 0.92..0.96; int4's max difference is 0.53..0.83, its
mean 0.14..0.19 and its agreement 0.57..0.66. w8a8 (llama.cpp's Q8_0 x Q8_0: int8 weights
and activations, a scale per 32 inputs each) is int8's equal: max 0.055..0.067, mean
0.015..0.017, agreement 0.94..0.98 (fbgemm's per-token 7-bit activations, before, erred
twice as much: max 0.08..0.15, mean 0.026..0.030).
w4a8 (4-bit weights, 8-bit activations, a scale per 32 inputs) errs as int4 does: max
0.54..0.75, mean 0.146..0.180, agreement 0.53..0.68 (group 32 or 128 alike); under a LoRA
adapter max 1.03, mean 0.21.
The random test models have
small margins between their top tokens, so int4's agreement is far below what trained
models show; the bounds leave about 2x margin on the errors and ~0.1 on agreement.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llmkit import LLM, EngineConfig, LoRARequest, SamplingParams
from llmkit.model.layers.native import NativeLinear
from llmkit.model.layers.quant import (
    DEQUANT_ROWS,
    QuantizedLinear,
    has_kernels,
    quantized_linear,
)
from llmkit.model.layers.weights.registry import METHODS

PROMPTS = [
    {"prompt_token_ids": [(7 * i + 13 * j) % 800 + 10 for j in range(5 + 9 * i)]} for i in range(4)
]
BOUNDS = {  # method: (max |dlogprob|, mean |dlogprob|, min top-1 agreement)
    "int8": (0.15, 0.03, 0.85),
    "w8a8": (0.15, 0.035, 0.85),
    "int4": (1.6, 0.35, 0.45),
    "w4a8": (1.6, 0.35, 0.45),  # int4's: the weight's rounding dominates
}


def greedy(llm: LLM, lora: LoRARequest | None = None) -> list[list[int]]:
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    outs = llm.generate(PROMPTS, params, use_tqdm=False, lora_request=lora)
    return [p["prompt_token_ids"] + list(o.outputs[0].token_ids) for p, o in zip(PROMPTS, outs)]


def score(
    llm: LLM, seqs: list[list[int]], lora: LoRARequest | None = None
) -> list[tuple[float, int]]:
    """(logprob of the sequence's token, top-1 token) at every position after the first."""
    params = SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=1)
    prompts = [{"prompt_token_ids": s} for s in seqs]
    outs = llm.generate(prompts, params, use_tqdm=False, lora_request=lora)
    scored = []
    for seq, out in zip(seqs, outs):
        assert out.prompt_logprobs is not None
        for token, ranked in zip(seq[1:], out.prompt_logprobs[1:]):
            assert ranked is not None
            top = max(ranked.items(), key=lambda kv: kv[1].logprob)[0]
            scored.append((ranked[token].logprob, top))
    return scored


def compare(ref: list[tuple[float, int]], got: list[tuple[float, int]]) -> tuple[float, ...]:
    diffs = [abs(a - b) for (a, _), (b, _) in zip(ref, got, strict=True)]
    agree = sum(a == b for (_, a), (_, b) in zip(ref, got)) / len(ref)
    return max(diffs), sum(diffs) / len(diffs), agree


@pytest.fixture(scope="module", params=["llama", "mistral", "qwen2", "qwen3"])
def reference(request, model_factory):
    """(model path, float32's greedy sequences, float32's scores of them)."""
    path = model_factory(request.param)
    llm = LLM(path)
    seqs = greedy(llm)
    return path, seqs, score(llm, seqs)


@pytest.mark.parametrize(
    ("method", "group_size"),
    [("int8", 128), ("w8a8", 128), ("int4", 32), ("int4", 128), ("w4a8", 32), ("w4a8", 128)],
)
def test_accuracy_against_float32(reference, method, group_size):
    path, seqs, ref = reference
    llm = LLM(path, quantization=method, quantization_group_size=group_size)
    layers = llm._core.runner.model.model.layers
    # torch's methods are QuantizedLinear layers, the kernels' the registry's format.
    native = method in METHODS
    kind = NativeLinear if native else QuantizedLinear
    assert all(isinstance(layer.mlp.down_proj, kind) for layer in layers)
    if native:
        assert {p.format for layer in layers for p in layer.mlp.down_proj.parts} == {
            METHODS[method]
        }
    # The head keeps full precision, but where activations are quantized (CPU): then Q8_0.
    head = llm._core.runner.model.lm_head
    if native:
        assert [p.format.name for p in head.parts] == ["Q8_0"]
    else:
        assert isinstance(head, nn.Linear)
    max_diff, mean_diff, agree = compare(ref, score(llm, seqs))
    bound_max, bound_mean, min_agree = BOUNDS[method]
    assert max_diff < bound_max
    assert mean_diff < bound_mean
    assert agree >= min_agree
    # Quantization changes the numbers: a path that silently ran float32 would fail here.
    assert max_diff > 1e-4
    # And the model serves: greedy generation runs to its length, batched.
    assert [len(s) for s in greedy(llm)] == [len(s) for s in seqs]


def test_int4_errs_more_than_int8(model_factory):
    path = model_factory("llama")
    ref_llm = LLM(path)
    seqs = greedy(ref_llm)
    ref = score(ref_llm, seqs)
    int8 = compare(ref, score(LLM(path, quantization="int8"), seqs))
    int4 = compare(ref, score(LLM(path, quantization="int4", quantization_group_size=32), seqs))
    assert int4[1] > 3 * int8[1]


@pytest.mark.parametrize("method", ["int8", "w8a8", "w4a8"])
def test_quantized_base_under_lora(model_factory, lora_factory, method):
    """LoRA's update runs in full precision on top of the quantized base projections."""
    path = model_factory("llama")
    lora = LoRARequest("a", 1, lora_factory("all-r16"))
    full = LLM(path, enable_lora=True)
    seqs = greedy(full, lora)
    ref = score(full, seqs, lora)
    quantized = LLM(path, enable_lora=True, quantization=method)
    max_diff, mean_diff, agree = compare(ref, score(quantized, seqs, lora))
    assert 1e-4 < max_diff < BOUNDS[method][0]
    assert agree >= BOUNDS[method][2]
    # The adapter is applied: without it the scores move much further.
    assert compare(ref, score(quantized, seqs))[1] > 5 * mean_diff


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quantization": "fp8"}, "quantization must be one of int8, int4, w8a8, w4a8"),
        ({"quantization_group_size": 48}, "quantization_group_size must be one of 32, 64"),
        (
            {"quantization": "int8", "tensor_parallel_size": 2},
            "quantization does not work with tensor_parallel_size > 1",
        ),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(model="demo", **kwargs)


@pytest.mark.parametrize(("method", "weight_error"), [("int8", 0.02), ("int4", 0.3)])
def test_prefill_and_decode_paths_agree(method, weight_error):
    """Many rows (a prefill) run the dequantized weight through the model dtype's GEMM; few
    rows (decodes) the packed kernel with bfloat16 activations: the same weight either way."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 72, bias=True)  # 72 outputs: the kernel's padding to 80 too
    layer = QuantizedLinear(linear, method, 64)
    x = torch.randn(DEQUANT_ROWS, 256)
    many = layer(x)
    few = torch.cat([layer(x[i : i + 32]) for i in range(0, DEQUANT_ROWS, 32)])
    # bfloat16 activations: ~3 significant digits over 256-term sums of magnitude ~1.
    assert (many - few).abs().max() < 0.03
    assert (many - linear(x)).abs().max() < weight_error


@pytest.mark.parametrize(
    ("method", "out_error", "weight_error"), [("w8a8", 0.1, 0.01), ("w4a8", 0.3, 0.005)]
)
def test_activation_quantized_rows_do_not_depend_on_their_batch(method, out_error, weight_error):
    """Each token gets its own activation scale: a row's output is the same bits alone, in
    a batch, or beside rows 100x larger (one scale per tensor would coarsen it there)."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 72, bias=True)
    layer = quantized_linear(linear, method, 32)
    x = torch.randn(40, 256)
    alone = torch.cat([layer(x[i : i + 1]) for i in range(40)])
    loud = torch.cat([x[:8], 100 * torch.randn(8, 256)])
    assert torch.equal(layer(x), alone)
    assert torch.equal(layer(loud)[:8], alone[:8])
    # Against float32, over 256-term sums: w8a8 (8-bit activations and weights, a scale per
    # 32 inputs each) errs by ~0.02, w4a8 (4-bit weights in groups of 32, steps of ~0.008)
    # by 0.13.
    assert (layer(x) - linear(x)).abs().max() < out_error
    assert torch.allclose(layer.dequantized(), linear.weight, atol=weight_error)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("method", "group_size"), [("int8", 128), ("int4", 32), ("int4", 128)])
def test_cuda_kernels_accuracy_against_float32(model_factory, method, group_size):
    """The same options on CUDA, on torch's CUDA kernels, within the CPU kernels' bounds."""
    if not has_kernels(method, torch.device("cuda")):
        pytest.skip(f"this torch build has no CUDA {method} kernel")
    path = model_factory("llama")
    cuda = dict(device="cuda", dtype="float32", num_kv_blocks=256)
    ref_llm = LLM(path, **cuda)
    seqs = greedy(ref_llm)
    ref = score(ref_llm, seqs)
    llm = LLM(path, quantization=method, quantization_group_size=group_size, **cuda)
    layers = llm._core.runner.model.model.layers
    assert all(isinstance(layer.mlp.down_proj, QuantizedLinear) for layer in layers)
    max_diff, mean_diff, agree = compare(ref, score(llm, seqs))
    bound_max, bound_mean, min_agree = BOUNDS[method]
    assert 1e-4 < max_diff < bound_max
    assert mean_diff < bound_mean
    assert agree >= min_agree
    assert [len(s) for s in greedy(llm)] == [len(s) for s in seqs]
