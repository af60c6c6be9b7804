"""LLM.beam_search: the same beams as transformers' beam search on the same weights, and
vLLM's length-penalty ranking of finished beams."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from llmkit import LLM, BeamSearchParams
from llmkit.engine.beam_search import beam_score


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
    params = BeamSearchParams(beam_width=3, max_tokens=5, length_penalty=0.5)
    out = llm.beam_search(["Hello world", "Hi"], params)
    for result in out:
        scores = [beam_score(b.tokens, b.cum_logprob, eos, 0.5) for b in result.sequences]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)
        for beam in result.sequences:
            assert beam.finish_reason == ("stop" if beam.tokens[-1] == eos else "length")
            assert beam.text == llm.get_tokenizer().decode(beam.tokens, skip_special_tokens=True)


@pytest.mark.parametrize(
    ("kwargs", "field"), [({"beam_width": 0}, "beam_width"), ({"max_tokens": -1}, "max_tokens")]
)
def test_bad_beam_search_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        BeamSearchParams(**{"beam_width": 2, "max_tokens": 4, **kwargs})
