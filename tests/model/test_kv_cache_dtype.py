"""kv_cache_dtype (vLLM's): float16 by default for a quantized model on CPU, the model's dtype
otherwise; a float16 cache holds twice float32's tokens in the same budget and answers as it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llmkit import LLM, SamplingParams

PROMPTS = [list(range(1, 40)), [1, 700, 12, 5]]


def _runner(model: str, **kwargs):
    return LLM(model, max_model_len=64, max_num_seqs=256, **kwargs)._core.runner


def test_auto_is_float16_for_a_quantized_model_on_cpu_else_the_models(tiny_model):
    assert _runner(tiny_model, quantization="w8a8").kv_caches[0][0].dtype == torch.float16
    assert _runner(tiny_model).kv_caches[0][0].dtype == torch.float32
    named = _runner(tiny_model, quantization="w8a8", kv_cache_dtype="float32")
    assert named.kv_caches[0][0].dtype == torch.float32


def test_float16_holds_twice_the_tokens_of_float32_in_the_same_budget(tiny_model):
    budget = {"cpu_kv_cache_gib": 0.002, "quantization": "w8a8"}
    half = _runner(tiny_model, **budget)
    full = _runner(tiny_model, kv_cache_dtype="float32", **budget)
    assert half.num_blocks == 2 * full.num_blocks
    cache_bytes = [sum(t.nbytes for pair in r.kv_caches for t in pair) for r in (half, full)]
    assert cache_bytes[0] == cache_bytes[1] <= 0.002 * 2**30


def _logprobs(llm: LLM) -> np.ndarray:
    out = llm.generate(PROMPTS, SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
    return np.array(
        [
            entry[token].logprob
            for o in out
            for token, entry in zip(o.prompt_token_ids[1:], o.prompt_logprobs[1:], strict=True)
        ]
    )


@pytest.mark.parametrize(("quantization", "nats"), [(None, 1e-2), ("w4a8", 5e-2)])
def test_a_float16_cache_answers_as_a_float32_one(tiny_model, quantization, nats):
    """Through the torch attention (float32 model) and the fused decode kernel (w4a8, whose
    int8 activations turn the cache's rounding into a code's step now and then)."""
    greedy = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    runs = {}
    for kv in ("float16", "float32"):
        llm = LLM(tiny_model, quantization=quantization, kv_cache_dtype=kv, max_model_len=64)
        tokens = [o.outputs[0].token_ids for o in llm.generate(PROMPTS, greedy, use_tqdm=False)]
        runs[kv] = (tokens, _logprobs(llm))
        llm.close()
    assert runs["float16"][0] == runs["float32"][0]
    assert np.abs(runs["float16"][1] - runs["float32"][1]).max() < nats


def test_an_unknown_kv_cache_dtype_is_refused_naming_the_field(tiny_model):
    with pytest.raises(ValueError, match="kv_cache_dtype must be one of"):
        LLM(tiny_model, kv_cache_dtype="int8")
