"""Speculative decoding (n-gram proposals): the same greedy output with fewer forwards,
the target distribution kept when sampling, its counts, and its config's checks."""

from __future__ import annotations

import anyio
import pytest
import torch

from llmkit import LLM, AsyncEngine, EngineConfig, SamplingParams
from llmkit.model.sampler import Sampler, SamplingRow

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}
CODE = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n" * 3


def mixed_requests() -> tuple[list[str], list[SamplingParams]]:
    """Echo-friendly and open prompts; stop strings, max_tokens, logprobs and n > 1."""
    prompts = [CODE, "one two three one two three one two", "Hello", CODE + "# again\n"]
    params = [
        SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, logprobs=2),
        SamplingParams(temperature=0, max_tokens=17, stop=["three one"]),
        SamplingParams(temperature=0, max_tokens=9, n=2),
        SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop=["sub(a"]),
    ]
    return prompts, params


def assert_same(plain, spec) -> None:
    for a, b in zip(plain, spec):
        for x, y in zip(a.outputs, b.outputs, strict=True):
            assert (x.token_ids, x.text, x.finish_reason) == (y.token_ids, y.text, y.finish_reason)
            assert x.stop_reason == y.stop_reason
            if x.logprobs is not None:
                assert y.logprobs is not None
                for p, q in zip(x.logprobs, y.logprobs, strict=True):
                    assert p.keys() == q.keys()
                    assert [v.logprob for v in p.values()] == pytest.approx(
                        [v.logprob for v in q.values()], abs=1e-4
                    )


@pytest.fixture(scope="module", params=["demo", "smollm2"])
def engines(request) -> tuple[LLM, LLM]:
    """The same model without and with speculation."""
    return (
        LLM(request.param, max_model_len=384),
        LLM(request.param, max_model_len=384, speculative_config=NGRAM),
    )


def test_greedy_output_is_token_identical_with_speculation(engines):
    plain, spec = engines
    model = spec._core.config.model
    prompts, params = mixed_requests()
    expected = plain.generate(prompts, params, use_tqdm=False)
    got = spec.generate(prompts, params, use_tqdm=False)
    assert_same(expected, got)
    stats = spec._core.stats()
    assert stats.kv_blocks_free == stats.kv_blocks_total  # rejected slots all given back
    assert stats.spec_num_draft_tokens > 0
    for out in got:
        counts = out.spec_decode
        assert counts is not None and counts.num_accepted_tokens <= counts.num_draft_tokens
    if model == "smollm2":  # a real model echoes its prompt: proposals get accepted
        assert stats.spec_num_accepted_tokens > 0
        assert stats.steps < plain._core.stats().steps
    per_request = [out.spec_decode.num_accepted_tokens for out in got if out.spec_decode]
    assert sum(per_request) == stats.spec_num_accepted_tokens


@pytest.mark.anyio
async def test_aborting_one_speculating_stream_leaves_the_others_right(engines):
    """Requests join and leave mid-way (one is abandoned after 3 outputs); the rest still
    match the plain engine, and every KV block comes back."""
    plain, spec = engines
    prompts, params = mixed_requests()
    expected = plain.generate(prompts, params, use_tqdm=False)
    config = EngineConfig(spec._core.config.model, max_model_len=384, speculative_config=NGRAM)
    long = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
    async with AsyncEngine(config) as engine:
        results: dict[int, object] = {}

        async def complete(i: int) -> None:
            async for out in engine.generate(prompts[i], params[i]):
                results[i] = out

        async def abandon() -> None:
            seen = 0
            async for _ in engine.generate(CODE, long):
                seen += 1
                if seen == 3:
                    break

        async with anyio.create_task_group() as tg:
            tg.start_soon(abandon)
            for i in range(len(prompts)):
                tg.start_soon(complete, i)
        with anyio.fail_after(5):
            while (s := engine.stats()).kv_blocks_free != s.kv_blocks_total or s.num_running:
                await anyio.sleep(0.01)
    assert_same(expected, [results[i] for i in range(len(prompts))])


def test_a_rejected_proposal_is_resampled_so_the_distribution_stays_the_targets():
    """Rejection sampling against a one-hot draft: over many rows that all propose token 2,
    the drawn tokens follow softmax(logits) (a chi-square test, 7 degrees of freedom)."""
    torch.manual_seed(0)
    logits = torch.randn(8) * 1.5
    n = 40_000
    sampler = Sampler(8, torch.device("cpu"), seed=1)
    row = SamplingRow(SamplingParams(temperature=1.0), [0], [], None, None)
    tokens = sampler(logits.repeat(n, 1), [row] * n, drafts=[2] * n)
    counts = torch.bincount(torch.tensor([t.token_id for t in tokens]), minlength=8).float()
    expected = torch.softmax(logits, -1) * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 24.3  # p = 0.001
    # The proposal alone is a different distribution: the test can tell them apart.
    assert counts[2] < n * 0.9


def test_seeded_sampling_with_speculation_is_reproducible(engines):
    _, spec = engines
    prompts = [CODE, "Hello there"]
    params = SamplingParams(temperature=0.8, max_tokens=16, seed=7, ignore_eos=True)
    runs = [spec.generate(prompts, params, use_tqdm=False) for _ in range(2)]
    assert [o.outputs[0].token_ids for o in runs[0]] == [o.outputs[0].token_ids for o in runs[1]]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"method": "eagle"}, "method"),
        ({"method": "ngram", "num_speculative_tokens": 0}, "num_speculative_tokens"),
        ({"method": "ngram", "prompt_lookup_min": 4, "prompt_lookup_max": 2}, "prompt_lookup_min"),
        ({"method": "ngram", "lookahead": 2}, "lookahead"),
        ({"method": "draft_model"}, "model"),
        ({"model": "demo", "num_speculative_tokens": 0}, "num_speculative_tokens"),
        ({"model": "demo", "prompt_lookup_max": 2}, "prompt_lookup_max"),
        ({"method": "ngram", "disable_by_batch_size": 1}, "disable_by_batch_size"),
    ],
)
def test_bad_speculative_configs_name_the_field(spec, field):
    with pytest.raises(ValueError, match=field):
        EngineConfig(model="demo", speculative_config=spec)


def test_no_proposals_at_the_batch_size_that_disables_them():
    """vLLM's ``disable_by_batch_size``: a step with that many running requests proposes
    nothing (rows spent on proposals no longer shorten a batch's slowest request); fewer
    propose as before. Greedy output is the same either way."""
    llm = LLM(
        "smollm2", max_model_len=384, speculative_config={**NGRAM, "disable_by_batch_size": 2}
    )
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    together = llm.generate([CODE, CODE + "# again"], params, use_tqdm=False)
    assert all(o.spec_decode is None or not o.spec_decode.num_drafts for o in together)
    alone = llm.generate([CODE], params, use_tqdm=False)[0]
    assert alone.outputs[0].token_ids == together[0].outputs[0].token_ids
    assert alone.spec_decode is not None and alone.spec_decode.num_drafts > 0
