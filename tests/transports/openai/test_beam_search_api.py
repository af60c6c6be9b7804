"""``use_beam_search`` on /v1/completions (vLLM's extra field), through the official openai
client against `llmkit serve` with the engine in its process and behind a unix socket: the
choices are LLM.beam_search's best beams, and what it cannot serve is a 400 naming the field."""

from __future__ import annotations

import openai
import pytest

from llmkit import LLM, BeamSearchParams

MODEL = "tiny"
PROMPTS = ["Hello world", "The quick brown fox"]


@pytest.fixture(scope="module")
def llm(tiny_model) -> LLM:
    return LLM(tiny_model, max_model_len=256)


def test_choices_are_llm_beam_searchs_best_beams(client, llm):
    params = BeamSearchParams(beam_width=3, max_tokens=6, length_penalty=0.5)
    expected = llm.beam_search(PROMPTS, params)
    out = client.completions.create(
        model=MODEL,
        prompt=PROMPTS,
        n=2,
        best_of=3,
        max_tokens=6,
        temperature=0,
        extra_body={"use_beam_search": True, "length_penalty": 0.5},
    )
    tok = llm.get_tokenizer()
    eos = tok.eos_token_id
    want = []
    for prompt, result in zip(PROMPTS, expected):
        n_prompt = len(tok.encode(prompt))
        for beam in result.sequences[:2]:
            output = beam.tokens[n_prompt:]
            shown = output[:-1] if output[-1] == eos else output
            want.append((tok.decode(shown, skip_special_tokens=True), beam.finish_reason))
    assert [(c.text, c.finish_reason) for c in out.choices] == want
    assert [c.index for c in out.choices] == [0, 1, 2, 3]
    assert out.usage is not None and out.usage.completion_tokens == sum(
        len(beam.tokens) - len(tok.encode(prompt))
        for prompt, result in zip(PROMPTS, expected)
        for beam in result.sequences[:2]
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"stream": True}, "stream"),
        ({"n": 3, "best_of": 2}, "best_of"),
        ({"n": 6}, "n"),  # 12 candidates a step: more than --max-logprobs 10
    ],
    ids=["streaming", "n over best_of", "too wide"],
)
def test_what_beam_search_cannot_serve_is_a_400_naming_the_field(client, extra, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(
            model=MODEL, prompt="Hi", max_tokens=4, extra_body={"use_beam_search": True, **extra}
        )
    assert caught.value.body["param"] == param
    assert client.completions.create(model=MODEL, prompt="Hi", max_tokens=2).choices
