"""The whole engine on a CUDA GPU: Triton and torch attention, CUDA graphs, float32 and
bfloat16.

Skipped without CUDA (CI has none); run on a GPU machine with ``pytest tests/gpu``. In
float32 the Triton kernels' dots are IEEE (no TF32), so greedy tokens must equal HF's
``generate`` exactly, through chunked prefill, prefix-cache hits, decode graphs and
preemption. bfloat16 must run without NaNs and agree with float32 on most tokens.
"""

from __future__ import annotations

import math

import pytest
import torch
import transformers

from llmkit import LLM, SamplingParams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

LENGTHS = (3, 17, 64, 200, 700)
MAX_TOKENS = 16
GREEDY = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
# A small, fixed cache: several engines share the GPU in one process.
ENGINE = dict(device="cuda", max_model_len=1024, num_kv_blocks=512)


def _tokens(outputs) -> list[list[int]]:
    return [list(o.outputs[0].token_ids) for o in outputs]


@pytest.fixture(scope="module", params=["llama", "mistral", "qwen2", "qwen3"])
def case(request, model_factory):
    """(model path, prompts, HF float32 greedy tokens on CUDA)."""
    path = model_factory(request.param)
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    hf = hf.to("cuda").eval()
    hf.generation_config.eos_token_id = None
    prompts = [[(11 * i + 7 * j) % 800 + 10 for j in range(n)] for i, n in enumerate(LENGTHS)]
    expected = []
    for ids in prompts:
        out = hf.generate(
            torch.tensor([ids], device="cuda"),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long, device="cuda"),
            max_new_tokens=MAX_TOKENS,
            do_sample=False,
            pad_token_id=0,
        )
        expected.append(out[0, len(ids) :].tolist())
    del hf
    torch.cuda.empty_cache()
    return path, prompts, expected


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_float32_greedy_equals_hf(case, backend):
    path, prompts, expected = case
    # 128-token steps: the 200- and 700-token prompts prefill in chunks beside decodes.
    llm = LLM(
        path, dtype="float32", attention_backend=backend, max_num_batched_tokens=128, **ENGINE
    )
    assert llm._core.runner.backend.name == backend
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected
    # Again: now every prompt's full blocks come from the prefix cache.
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected
    assert llm.stats().prefix_cache_hit_rate > 0


def test_cuda_graphs_replay_the_decodes(case, monkeypatch):
    path, prompts, expected = case
    llm = LLM(path, dtype="float32", max_num_batched_tokens=128, **ENGINE)
    graphs = llm._core.runner.graphs
    assert graphs is not None
    replays = []
    replay = graphs.replay
    monkeypatch.setattr(graphs, "replay", lambda size, *a: replays.append(size) or replay(size, *a))
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected
    # Five requests pad to the 8-graph; the stragglers' steps use smaller ones.
    assert 8 in replays and len(set(replays)) > 1
    assert LLM(path, dtype="float32", enforce_eager=True, **ENGINE)._core.runner.graphs is None


def test_float32_greedy_with_preemption(case):
    path, _, _ = case
    prompts = [[(13 * i + 5 * j) % 800 + 10 for j in range(40)] for i in range(4)]
    reference = LLM(path, dtype="float32", **ENGINE).generate(prompts, GREEDY, use_tqdm=False)
    # Blocks of 4 tokens: the four prompts take 40 of 48 blocks, and their outputs need 16
    # more while all four still run, so the newest requests are preempted and recomputed.
    llm = LLM(
        path,
        dtype="float32",
        device="cuda",
        max_model_len=1024,
        block_size=4,
        num_kv_blocks=48,
        max_num_batched_tokens=16,
    )
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == _tokens(reference)
    assert llm.stats().num_preemptions > 0


def test_bfloat16_runs_without_nans_and_agrees(case):
    path, prompts, expected = case
    llm = LLM(path, dtype="bfloat16", **ENGINE)
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=1)
    outs = llm.generate(prompts, params, use_tqdm=False)
    for out in outs:
        assert out.outputs[0].logprobs is not None
        for ranked in out.outputs[0].logprobs:
            assert all(math.isfinite(lp.logprob) for lp in ranked.values())
    # Tokens until the first difference: bfloat16 rounding flips near-ties, after which the
    # sequences part for good.
    agreed = 0
    for got, want in zip(_tokens(outs), expected):
        agreed += next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(want))
    assert agreed / (len(expected) * MAX_TOKENS) >= 0.5
