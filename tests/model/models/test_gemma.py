"""Gemma 3 and 4 beyond the parity every decoder passes (tests/engine/test_hf_parity.py): their
learnt scales, which a new model holds at neutral values, and Gemma 4's shared KV caches."""

from __future__ import annotations

import shutil

import pytest
import torch
import transformers
from tests.model.hf_check import assert_answers_as_hf

from llmkit import LLM
from llmkit.model.loader import model_class
from llmkit.model.shape import model_shape

PROMPTS = [list(range(5, 12)), list(range(40, 140)) + list(range(300, 340))]  # 140 > window


@pytest.fixture(scope="module", params=["gemma3_text", "gemma4_text"])
def scaled(request, model_factory, tmp_path_factory):
    """The tiny model with random norm weights (Gemma 3's ``1 + w`` among them), and for Gemma
    4 random layer scalars and router and per-expert scales: zero or one in a new model."""
    folder = model_factory(request.param)
    out = tmp_path_factory.mktemp("scaled") / request.param
    shutil.copytree(folder, out)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    torch.manual_seed(1)
    with torch.no_grad():
        tensors = [*hf.named_parameters(), *hf.named_buffers()]
        for name, tensor in tensors:
            if "norm" in name or name.endswith(("layer_scalar", ".scale", "per_expert_scale")):
                tensor.add_(torch.randn_like(tensor) * 0.3)
    hf.save_pretrained(out)
    return str(out), hf


def test_learnt_scales_give_hfs_logprobs_and_tokens(scaled):
    path, hf = scaled
    assert_answers_as_hf(LLM(path, max_model_len=512), hf, PROMPTS, 6, 1e-4)


def test_gemma4_keeps_a_kv_cache_per_layer_that_computes_keys(model_factory):
    """Six layers, the last two reading the caches of layers 3 (local) and 2 (global): four
    caches, each of its layer's kind (local: 2 KV heads of 16, global: 1 of 32)."""
    llm = LLM(model_factory("gemma4_text"), max_model_len=512)
    caches = llm._core.runner.kv_caches
    assert [tuple(k.shape[2:]) for k, _ in caches] == [(2, 16), (2, 16), (1, 32), (2, 16)]
    reads = [layer.self_attn.reads for layer in llm._core.runner.model.model.layers]
    assert reads == [0, 1, 2, 3, 3, 2]


@pytest.mark.parametrize(("arch", "value"), [("gemma3_text", True), ("gemma4_text", "all")])
def test_bidirectional_attention_is_refused(arch, value, model_factory):
    config = transformers.AutoConfig.from_pretrained(model_factory(arch))
    config.use_bidirectional_attention = value
    with pytest.raises(ValueError, match="bidirectional"):
        model_class(config)(config)


def test_gemma4_is_described_by_its_experts_and_windows(model_factory):
    config = transformers.AutoConfig.from_pretrained(model_factory("gemma4_text"))
    shape = model_shape(model_class(config), config)
    assert (
        shape.describe() == "Gemma4ForCausalLM, 4 experts (2 a token), window 16 on 4 of 6 layers"
    )
