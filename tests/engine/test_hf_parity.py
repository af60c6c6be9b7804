"""llmkit's greedy tokens and logprobs equal HuggingFace transformers' on the same weights."""

from __future__ import annotations

import pytest
import torch
import transformers

from llmkit import LLM, SamplingParams
from llmkit.model import registry

LENGTHS = [3, 7, 15, 33, 64, 100, 180, 300]
MAX_TOKENS = 12
ARCHS = registry.model_types("decoder")  # every decoder in the registry, a new one too


def _prompts(tokenizer, lengths=LENGTHS, prefix: list[int] = ()) -> list[list[int]]:
    words = "the engine serves a batch of prompts while the cache keeps every block".split()
    prompts = []
    for i, n in enumerate(lengths):
        text = " ".join(words[(i + j) % len(words)] for j in range(n))
        ids = list(prefix) + tokenizer.encode(text, add_special_tokens=False)
        prompts.append(ids[:n] if not prefix else ids[: len(prefix) + n])
    return prompts


def _hf_greedy(hf, prompts: list[list[int]], max_tokens: int = MAX_TOKENS) -> list[list[int]]:
    hf.generation_config.eos_token_id = None  # like ignore_eos: neither stop nor mask
    outs = []
    for ids in prompts:
        gen = hf.generate(
            torch.tensor([ids]),
            max_new_tokens=max_tokens,
            do_sample=False,
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            pad_token_id=0,
        )
        outs.append(gen[0, len(ids) :].tolist())
    return outs


@pytest.fixture(scope="module", params=ARCHS)
def arch_case(request, model_factory):
    path = model_factory(request.param)
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    prompts = _prompts(tokenizer)
    return path, hf, prompts, _hf_greedy(hf, prompts)


GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)


def _tokens(outputs):
    return [o.outputs[0].token_ids for o in outputs]


def test_greedy_matches_hf_in_one_batch(arch_case):
    path, _, prompts, expected = arch_case
    llm = LLM(path, max_model_len=512)
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected


def test_greedy_matches_hf_with_chunked_prefill(arch_case):
    path, _, prompts, expected = arch_case
    llm = LLM(path, max_model_len=512, max_num_batched_tokens=48)
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected
    assert llm.stats().steps > sum(len(p) for p in prompts) // 48


def test_greedy_matches_hf_under_preemption(arch_case):
    path, _, prompts, expected = arch_case
    # Small chunks admit many prompts at once; their growth then runs the pool dry: blocks
    # for one 384-token sequence (24 of each whole-context group, a window of the others').
    kw = {"max_model_len": 512, "max_num_batched_tokens": 32}
    pool = LLM(path, **kw)._core.runner.kv_layout.blocks_per_sequence(384, 32, 16)
    llm = LLM(path, num_kv_blocks=pool, **kw)
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected
    assert llm.stats().num_preemptions > 0
    assert llm.stats().kv_blocks_free == pool


def test_greedy_matches_hf_with_prefix_cache_hits(arch_case):
    path, hf, _, _ = arch_case
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    shared = _prompts(tokenizer, [120])[0]
    prompts = _prompts(tokenizer, [5, 17, 40, 3], prefix=shared)
    expected = _hf_greedy(hf, prompts)
    llm = LLM(path, max_model_len=512)
    assert _tokens(llm.generate(prompts[:1], GREEDY, use_tqdm=False)) == expected[:1]
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected
    assert llm.stats().prefix_cache_hit_rate > 0.3


def test_prompt_and_sample_logprobs_match_hf(arch_case):
    path, hf, prompts, expected = arch_case
    llm = LLM(path, max_model_len=512)
    params = SamplingParams(
        temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=5, prompt_logprobs=5
    )
    chosen = [0, 4, 7]
    outputs = llm.generate([prompts[i] for i in chosen], params, use_tqdm=False)
    for i, out in zip(chosen, outputs):
        full = prompts[i] + expected[i]
        with torch.no_grad():
            ref = torch.log_softmax(hf(torch.tensor([full])).logits[0].float(), dim=-1)
        n = len(prompts[i])
        assert out.prompt_logprobs[0] is None
        for pos in range(1, n):
            entry = out.prompt_logprobs[pos]
            assert entry[full[pos]].logprob == pytest.approx(
                ref[pos - 1, full[pos]].item(), abs=1e-4
            )
            top = ref[pos - 1].topk(5)
            for tid, val in zip(top.indices.tolist(), top.values.tolist()):
                assert entry[tid].logprob == pytest.approx(val, abs=1e-4)
        comp = out.outputs[0]
        assert len(comp.logprobs) == MAX_TOKENS
        for step, (tid, entry) in enumerate(zip(comp.token_ids, comp.logprobs)):
            row = ref[n - 1 + step]
            assert entry[tid].logprob == pytest.approx(row[tid].item(), abs=1e-4)
            assert entry[tid].rank == 1  # greedy picks the most likely token
            assert set(entry) >= set(row.topk(5).indices.tolist())
        assert comp.cumulative_logprob == pytest.approx(
            sum(e[t].logprob for t, e in zip(comp.token_ids, comp.logprobs)), abs=1e-4
        )
