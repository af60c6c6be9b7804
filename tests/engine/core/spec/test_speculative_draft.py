"""Draft-model speculation: a smaller model sharing the tokenizer proposes, the target
checks; greedy output is the target's own, sampling keeps its distribution, blocks (the
draft's cache is indexed by the target's) all come back, and bad drafts name the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
import torch

from llmkit import LLM, AsyncEngine, EngineConfig, SamplingParams
from llmkit.model.demo import ModelSpec
from llmkit.model.sampler import Sampler, SamplingRow

SMALL = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, seed=1)
PROMPTS = ["Hello world the quick brown fox", "one two three one two three one two", "Hi"]
PARAMS = [
    SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, logprobs=2),
    SamplingParams(temperature=0, max_tokens=17, stop=["three one"]),
    SamplingParams(temperature=0, max_tokens=9, n=2),
]


def draft_spec(draft: str) -> dict:
    return {"method": "draft_model", "model": draft, "num_speculative_tokens": 3}


@pytest.fixture(scope="module")
def expected(tiny_model) -> list:
    return LLM(tiny_model, max_model_len=256).generate(PROMPTS, PARAMS, use_tqdm=False)


# The smaller draft disagrees with the target most of the time; the target as its own
# draft agrees always, so every proposal is accepted (the draft's cache must keep up).
@pytest.fixture(scope="module", params=["smaller", "itself"])
def draft(request, tiny_model, model_factory) -> str:
    return model_factory(SMALL) if request.param == "smaller" else tiny_model


@pytest.mark.anyio
async def test_greedy_output_is_the_targets_across_a_mixed_batch(tiny_model, draft, expected):
    """Speculating requests beside one that cannot (a one-token answer) and one abandoned
    after 3 outputs; then every block is free and the per-request counts add up."""
    results: dict[int, object] = {}
    config = EngineConfig(tiny_model, max_model_len=256, speculative_config=draft_spec(draft))
    async with AsyncEngine(config) as engine:

        async def complete(i: int) -> None:
            async for out in engine.generate(PROMPTS[i], PARAMS[i]):
                results[i] = out

        async def abandon() -> None:
            seen = 0
            long = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
            async for _ in engine.generate("Story:", long):
                seen += 1
                if seen == 3:
                    break

        async def one_token() -> None:
            async for out in engine.generate("Hi", SamplingParams(max_tokens=1)):
                results[-1] = out

        async with anyio.create_task_group() as tg:
            tg.start_soon(abandon)
            tg.start_soon(one_token)
            for i in range(len(PROMPTS)):
                tg.start_soon(complete, i)
        with anyio.fail_after(5):
            while (s := engine.stats()).kv_blocks_free != s.kv_blocks_total or s.num_running:
                await anyio.sleep(0.01)
    for i, want in enumerate(expected):
        got = results[i]
        for x, y in zip(want.outputs, got.outputs, strict=True):
            assert (x.token_ids, x.text, x.finish_reason) == (y.token_ids, y.text, y.finish_reason)
    counts = [results[i].spec_decode for i in range(len(PROMPTS))]
    assert all(c is not None and c.num_drafts > 0 for c in counts)
    assert results[-1].spec_decode.num_draft_tokens == 0  # one token: nothing to propose
    if draft == tiny_model:
        assert all(c.num_accepted_tokens == c.num_draft_tokens for c in counts)
    assert s.spec_num_accepted_tokens >= sum(c.num_accepted_tokens for c in counts)


def test_seeded_sampling_with_a_draft_is_reproducible(tiny_model, model_factory):
    llm = LLM(tiny_model, max_model_len=256, speculative_config=draft_spec(model_factory(SMALL)))
    params = SamplingParams(temperature=0.8, max_tokens=16, seed=7, ignore_eos=True)
    runs = [llm.generate(PROMPTS, params, use_tqdm=False) for _ in range(2)]
    assert [o.outputs[0].token_ids for o in runs[0]] == [o.outputs[0].token_ids for o in runs[1]]
    assert all(o.spec_decode.num_draft_tokens > 0 for o in runs[0])


@pytest.mark.parametrize("min_p", [0.0, 0.2])
def test_a_draft_drawn_proposal_is_checked_against_its_own_distribution(min_p):
    """Proposals drawn from q, kept with min(1, p/q), else redrawn from max(p - q, 0): over
    many rows the tokens follow p (min_p's cut included), not q (chi-square, p = 0.001)."""
    torch.manual_seed(0)
    p_logits, q = torch.randn(8) * 1.5, torch.softmax(torch.randn(8), -1)
    n = 40_000
    drafts = torch.multinomial(q, n, replacement=True).tolist()
    sampler = Sampler(8, torch.device("cpu"), seed=1)
    row = SamplingRow(SamplingParams(temperature=1.0, min_p=min_p), [0], [], None, None)
    tokens = sampler(p_logits.repeat(n, 1), [row] * n, drafts, q.repeat(n, 1))
    counts = torch.bincount(torch.tensor([t.token_id for t in tokens]), minlength=8).float()
    p = torch.softmax(p_logits, -1)
    p = torch.where(p < min_p * p.max(), 0.0, p)
    expected = p / p.sum() * n
    kept = expected > 0
    assert counts[~kept].sum() == 0
    chi2 = ((counts - expected)[kept] ** 2 / expected[kept]).sum()
    assert float(chi2) < 24.3  # 7 degrees of freedom at most
    proposed = torch.bincount(torch.tensor(drafts), minlength=8).float()
    assert float(((proposed - expected)[kept] ** 2 / expected[kept]).sum()) > 24.3  # q is not p


def other_tokenizer(model: str, out: Path) -> str:
    """``model`` with two of its tokenizer's tokens swapped: the same size, not the same."""
    shutil.copytree(model, out)
    data = json.loads((out / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = "ay", "ck"
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (out / "tokenizer.json").write_text(json.dumps(data))
    return str(out)


@pytest.mark.parametrize("kind", ["vocabulary", "tokenizer", "no model directory"])
def test_a_draft_that_cannot_serve_is_refused_naming_the_field(
    kind, tiny_model, model_factory, tmp_path
):
    if kind == "vocabulary":
        draft = model_factory(ModelSpec(hidden_size=32, num_layers=1, vocab_size=4096))
    elif kind == "tokenizer":
        draft = other_tokenizer(model_factory(SMALL), tmp_path / "other")
    else:
        draft = str(tmp_path / "missing")
    with pytest.raises(ValueError, match=f"speculative_config's model.*{kind}"):
        LLM(tiny_model, max_model_len=256, speculative_config={"model": draft})
