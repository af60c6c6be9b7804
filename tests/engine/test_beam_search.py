"""LLM.beam_search: the same beams as transformers' beam search on the same weights, and
vLLM's length-penalty ranking of finished beams."""

from __future__ import annotations

import anyio
import pytest
import torch
from transformers import AutoModelForCausalLM

from llmkit import LLM, AsyncEngine, BeamSearchParams, EngineConfig
from llmkit.engine.beam_search import BeamSearch, beam_score
from llmkit.engine.beam_search_stream import start_beam_search
from llmkit.outputs import CompletionOutput, Logprob, PositionLogprobs, RequestOutput


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, max_model_len=128, dtype="float32")


def test_fixed_length_beams_equal_transformers_beam_search(llm, tiny_model):
    hf = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None  # fixed length, like ignore_eos
    tok = llm.get_tokenizer()
    prompts = [tok.encode("Hello world"), tok.encode("The quick brown fox jumps over")]
    params = BeamSearchParams(beam_width=4, max_tokens=6, ignore_eos=True)
    ours = llm.beam_search([{"prompt_token_ids": p} for p in prompts], params)
    for prompt, out in zip(prompts, ours):
        with torch.no_grad():
            theirs = hf.generate(
                torch.tensor([prompt]),
                num_beams=4,
                num_return_sequences=4,
                do_sample=False,
                max_new_tokens=6,
                pad_token_id=0,
            ).tolist()
            assert [beam.tokens for beam in out.sequences] == theirs
            for seq in out.sequences:
                logprobs = torch.log_softmax(hf(torch.tensor([seq.tokens])).logits[0], -1)
                new = range(len(prompt), len(seq.tokens))
                expected = sum(float(logprobs[i - 1, seq.tokens[i]]) for i in new)
                assert seq.cum_logprob == pytest.approx(expected, abs=1e-4)
                assert len(seq.logprobs) == 6 and seq.finish_reason == "length"


def test_finished_beams_rank_by_vllms_length_penalty(llm):
    eos = llm.get_tokenizer().eos_token_id
    # Without the EOS a beam's length counts whole (prompt included); with it, one less.
    assert beam_score([1, 2, 3, 4], -2.0, eos, 1.0) == -0.5
    assert beam_score([1, 2, 3, eos], -2.0, eos, 1.0) == pytest.approx(-2 / 3)
    assert beam_score([1, 2, 3, 4], -2.0, eos, 0.0) == -2.0
    # A penalty whose power leaves float's range (schemathesis sent -1.78e16): its limit.
    assert beam_score([1, 2, 3, 4], -2.0, eos, -1.78e16) == float("-inf")
    assert beam_score([1, 2, 3, 4], -2.0, eos, 1e16) == 0.0
    params = BeamSearchParams(beam_width=3, max_tokens=5, length_penalty=0.5)
    out = llm.beam_search(["Hello world", "Hi"], params)
    for result in out:
        scores = [beam_score(b.tokens, b.cum_logprob, eos, 0.5) for b in result.sequences]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)
        for beam in result.sequences:
            assert beam.finish_reason == ("stop" if beam.tokens[-1] == eos else "length")
            assert beam.text == llm.get_tokenizer().decode(beam.tokens, skip_special_tokens=True)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"beam_width": 0}, "beam_width"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"early_stopping": "sometimes"}, "early_stopping"),
    ],
)
def test_bad_beam_search_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        BeamSearchParams(**{"beam_width": 2, "max_tokens": 4, **kwargs})


def _step(*candidates: dict[int, float]) -> list[RequestOutput]:
    """One engine output per live beam, each with its candidates' logprobs."""
    return [
        RequestOutput("r", None, [], None, [CompletionOutput(0, "", [], 0.0, [_logprobs(c)])], True)
        for c in candidates
    ]


def _logprobs(candidates: dict[int, float]) -> PositionLogprobs:
    return {t: Logprob(lp, rank, "") for rank, (t, lp) in enumerate(candidates.items(), 1)}


@pytest.mark.parametrize("early_stopping", [None, True, False, "never"])
def test_early_stopping_ends_a_prompt_once_beam_width_beams_finished(early_stopping):
    """EOS is 0. After step 2, two beams have finished (scores -0.1 and -0.15) and the best
    live one, [5, 1, 3], scores -0.16 now: True stops, False stops (it is no better now),
    "never" goes on (at the full 4 tokens it could score -0.12), None always goes on; one
    more step makes it [5, 1, 3, 6] at -0.1225, better than the finished [5, 1, 0]."""
    params = BeamSearchParams(2, max_tokens=3, early_stopping=early_stopping)
    search = BeamSearch([[5]], params, eos_token_id=0)
    search.advance(_step({0: -0.1, 1: -0.2, 2: -3.0}))
    search.advance(_step({0: -0.1, 3: -0.28}, {0: -2.0, 4: -4.0}))
    stops = early_stopping in (True, False)
    assert search.pending() == ([] if stops else [[5, 1, 3], [5, 2, 4]])
    if not stops:
        search.advance(_step({6: -0.01}, {6: -0.01}))
    best = [b.tokens for b in search.results()[0].sequences]
    assert best == [[5, 0], [5, 1, 0] if stops else [5, 1, 3, 6]]


def test_never_stopping_early_weighs_a_huge_length_penalty_at_its_limit():
    """ "never" scores the best live beam at its longest: with a penalty whose power leaves
    float's range, the score's limit (0, as for the finished beams), not an OverflowError;
    no beam can then do better, and the search stops."""
    params = BeamSearchParams(2, max_tokens=3, early_stopping="never", length_penalty=1e300)
    search = BeamSearch([[5]], params, eos_token_id=0)
    search.advance(_step({0: -0.1, 1: -0.2, 2: -3.0}))
    search.advance(_step({0: -0.1, 3: -0.28}, {0: -2.0, 4: -4.0}))
    assert search.pending() == []
    assert len(search.results()[0].sequences) == 2


@pytest.mark.anyio
async def test_an_engines_beam_search_is_llms_and_closing_it_aborts_its_step(llm, tiny_model):
    params = BeamSearchParams(beam_width=3, max_tokens=5)
    expected = llm.beam_search(["Hello world"], params)[0].sequences
    start = len(llm.get_tokenizer().encode("Hello world"))
    config = EngineConfig(tiny_model, max_model_len=128, dtype="float32")
    async with AsyncEngine(config) as engine:
        outputs = [out async for out in start_beam_search(engine, "Hello world", params)]
        assert len(outputs) == 1 and outputs[0].finished
        got = outputs[0].outputs
        assert [c.token_ids for c in got] == [beam.tokens[start:] for beam in expected]
        assert [c.cumulative_logprob for c in got] == [beam.cum_logprob for beam in expected]
        long = start_beam_search(engine, "Hello world", BeamSearchParams(3, max_tokens=100))
        with anyio.move_on_after(0.3):
            await long.__anext__()
        await long.aclose()
        with anyio.fail_after(5):
            while (s := engine.stats()).num_running or s.kv_blocks_free != s.kv_blocks_total:
                await anyio.sleep(0.01)
