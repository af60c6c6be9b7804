"""Sampling parameters end to end on a tiny model: stops, lengths, n, biases, seeds, penalties."""

from __future__ import annotations

import pytest

from llmkit import LLM, RequestOutputKind, SamplingParams


@pytest.fixture(scope="module")
def llm(tiny_model):
    return LLM(tiny_model, max_model_len=512)


def _greedy(**kw):
    return SamplingParams(temperature=0.0, ignore_eos=True, **kw)


def _one(llm, prompt, params):
    return llm.generate(prompt, params, use_tqdm=False)[0].outputs[0]


PROMPT = "The quick brown fox"


def test_max_tokens_ends_with_length(llm):
    out = _one(llm, PROMPT, _greedy(max_tokens=7))
    assert len(out.token_ids) == 7 and out.finish_reason == "length"


def test_stop_string_is_cut_from_the_text_unless_asked(llm):
    full = _one(llm, PROMPT, _greedy(max_tokens=24)).text
    stop = full[5:8]
    out = _one(llm, PROMPT, _greedy(max_tokens=24, stop=[stop]))
    assert out.finish_reason == "stop" and out.stop_reason == stop
    assert out.text == full[: full.index(stop)]
    kept = _one(llm, PROMPT, _greedy(max_tokens=24, stop=[stop], include_stop_str_in_output=True))
    assert kept.text == full[: full.index(stop) + len(stop)]


def test_stop_token_ids_end_the_completion(llm):
    tokens = _one(llm, PROMPT, _greedy(max_tokens=16)).token_ids
    target = tokens[4]
    out = _one(llm, PROMPT, _greedy(max_tokens=16, stop_token_ids=[target]))
    first = tokens.index(target)
    assert out.token_ids == tokens[: first + 1]
    assert out.finish_reason == "stop" and out.stop_reason == target


def test_min_tokens_holds_back_eos_and_stop_tokens(llm):
    tokens = _one(llm, PROMPT, _greedy(max_tokens=8)).token_ids
    out = _one(llm, PROMPT, _greedy(max_tokens=8, min_tokens=6, stop_token_ids=[tokens[0]]))
    assert len(out.token_ids) >= 6
    assert tokens[0] not in out.token_ids[:5]


def test_eos_stops_unless_ignored(llm):
    eos = llm._core.tokenizer.eos_token_id
    out = _one(llm, PROMPT, SamplingParams(temperature=0, max_tokens=10, logit_bias={eos: 100.0}))
    assert out.token_ids == [eos] and out.finish_reason == "stop" and out.stop_reason is None
    assert out.text == ""
    out = _one(llm, PROMPT, _greedy(max_tokens=4, logit_bias={eos: 100.0}))
    assert out.token_ids == [eos] * 4 and out.finish_reason == "length"


def test_logit_bias_and_allowed_token_ids(llm):
    out = _one(llm, PROMPT, _greedy(max_tokens=5, logit_bias={77: 100.0}))
    assert out.token_ids == [77] * 5
    allowed = [100, 101, 102]
    out = _one(llm, PROMPT, SamplingParams(max_tokens=20, allowed_token_ids=allowed, seed=3))
    assert set(out.token_ids) <= set(allowed)


def test_n_completions_share_the_prompt_blocks(llm):
    prompt = list(range(10, 58))  # 48 tokens = 3 full blocks
    outputs = llm.generate(prompt, SamplingParams(n=4, max_tokens=8, seed=1), use_tqdm=False)
    out = outputs[0]
    assert [c.index for c in out.outputs] == [0, 1, 2, 3]
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1
    assert llm._core.allocator.stats.hit_tokens >= 3 * 2 * 16  # siblings 1..3 reuse 2+ blocks


def test_seeded_request_is_the_same_alone_and_in_a_busy_batch(llm):
    seeded = SamplingParams(
        temperature=1.0, top_p=0.9, top_k=50, max_tokens=16, seed=1234, ignore_eos=True
    )
    alone = _one(llm, PROMPT, seeded).token_ids
    others = [f"Other prompt number {i}" for i in range(32)]
    params = [
        SamplingParams(temperature=1.0, max_tokens=16, seed=None if i % 2 else i) for i in range(32)
    ]
    outs = llm.generate([*others, PROMPT], [*params, seeded], use_tqdm=False)
    assert outs[-1].outputs[0].token_ids == alone


def test_unseeded_sampling_varies(llm):
    params = SamplingParams(temperature=1.5, max_tokens=16, ignore_eos=True)
    runs = {tuple(_one(llm, PROMPT, params).token_ids) for _ in range(3)}
    assert len(runs) > 1


def test_penalties_discourage_repeats(llm):
    plain = _one(llm, PROMPT, _greedy(max_tokens=32)).token_ids
    penalised = _one(
        llm, PROMPT, _greedy(max_tokens=32, frequency_penalty=2.0, presence_penalty=2.0)
    ).token_ids
    assert len(set(penalised)) > len(set(plain))
    rep = _one(llm, PROMPT, _greedy(max_tokens=32, repetition_penalty=5.0)).token_ids
    assert len(set(rep)) > len(set(plain))


def test_top_k_one_is_greedy(llm):
    greedy = _one(llm, PROMPT, _greedy(max_tokens=12)).token_ids
    sampled = _one(
        llm, PROMPT, SamplingParams(temperature=1.0, top_k=1, max_tokens=12, ignore_eos=True)
    )
    assert sampled.token_ids == greedy


@pytest.mark.parametrize("top_p", [1e-9, 1e-45, 1e-323])
def test_a_tiny_top_p_keeps_the_top_token(llm, top_p):
    """Below float32's smallest number top_p rounds to 0: the top token still stays (it
    had masked every token, and sampled token 0)."""
    greedy = _one(llm, PROMPT, _greedy(max_tokens=12)).token_ids
    params = SamplingParams(temperature=1.0, top_p=top_p, max_tokens=12, ignore_eos=True)
    assert _one(llm, PROMPT, params).token_ids == greedy


def test_output_kinds_through_the_core(llm):
    """DELTA outputs concatenate to the CUMULATIVE text; FINAL_ONLY yields once."""
    core = llm._core
    texts = {}
    for kind in RequestOutputKind:
        state, reqs = llm._processor.process(PROMPT, _greedy(max_tokens=12, output_kind=kind))
        core.add(state, reqs)
        seen = []
        while not state.finished:
            core.step()
            out = state.take_output()
            if out is not None:
                seen.append(out)
        texts[kind] = seen
    final = texts[RequestOutputKind.CUMULATIVE][-1].outputs[0]
    assert "".join(o.outputs[0].text for o in texts[RequestOutputKind.DELTA]) == final.text
    deltas = texts[RequestOutputKind.DELTA]
    assert [t for o in deltas for t in o.outputs[0].token_ids] == final.token_ids
    assert len(texts[RequestOutputKind.FINAL_ONLY]) == 1
    assert texts[RequestOutputKind.FINAL_ONLY][0].outputs[0].text == final.text


def test_detokenizer_never_splits_a_utf8_character(llm):
    """Characters the tokenizer never saw arrive as single bytes; no delta may hold half of one."""
    from llmkit.engine.core.detokenizer import IncrementalDetokenizer

    tok = llm._core.tokenizer
    text = "ж✓Ω and 🐍"
    ids = tok.encode(text, add_special_tokens=False)
    assert any("\ufffd" in tok.token_text(i) for i in ids), "needs byte-level pieces"
    detok = IncrementalDetokenizer(tok, tok.encode("x"), SamplingParams())
    seen = []
    for i in ids:
        before = detok.visible_text(False)
        detok.update(i, check_stop=True)
        delta = detok.visible_text(False)[len(before) :]
        assert "\ufffd" not in delta
        seen.append(delta)
    assert "".join(seen) == text


def test_the_engine_seed_makes_unseeded_sampling_reproducible(tiny_model):
    params = SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=True)

    def run(seed: int) -> list[list[int]]:
        llm = LLM(tiny_model, seed=seed, max_model_len=256)
        return [o.outputs[0].token_ids for o in llm.generate(["a", "b"], params, use_tqdm=False)]

    assert run(1) == run(1)
    assert run(1) != run(2)
