"""The sampler at float32's edges: a repetition penalty so small that a seen token's logit
divided by it overflows (or the penalty itself rounds to 0) still samples a seen token, as
a small one does; a penalty or temperature past float32's largest makes no NaN either; and
none samples a token a mask ruled out."""

from __future__ import annotations

import pytest
import torch

from llmkit.model.sampler import Sampler, SamplingRow
from llmkit.sampling_params import SamplingParams

# Tokens 1 and 2 are in the prompt and score above 0: a tiny penalty multiplies them up.
LOGITS = torch.tensor([[3.0, 1.0, 2.0, 0.5, -1.0]])
PROMPT = [1, 2, 4]


@pytest.mark.parametrize("penalty", [1e-30, 1e-45, 5e-324])
@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0])
def test_a_tiny_repetition_penalty_samples_a_seen_token(penalty, temperature):
    sampler = Sampler(5, torch.device("cpu"), seed=0)
    params = SamplingParams(temperature=temperature, repetition_penalty=penalty)
    rows = [SamplingRow(params, PROMPT, [], None, None)] * 16
    tokens = {t.token_id for t in sampler(LOGITS.repeat(16, 1), rows)}
    assert tokens <= {1, 2}


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_tiny_penalty_leaves_a_banned_token_banned(temperature):
    """Token 4, the end of text, is banned until min_tokens: -inf, which a penalty rounded
    to 0 would have turned into NaN."""
    sampler = Sampler(5, torch.device("cpu"), seed=0)
    params = SamplingParams(temperature=temperature, repetition_penalty=5e-324, min_tokens=2)
    logits = torch.tensor([[-5.0, -6.0, -7.0, -8.0, -1.0]])
    rows = [SamplingRow(params, PROMPT, [], 4, None)] * 16
    tokens = {t.token_id for t in sampler(logits.repeat(16, 1), rows)}
    assert 4 not in tokens


def test_a_huge_repetition_penalty_leaves_a_seen_zero_logit_at_zero():
    """Past float32's largest the penalty is inf, and a seen token's logit of exactly 0
    times inf is NaN, which the greedy maximum picked."""
    sampler = Sampler(3, torch.device("cpu"), seed=0)
    params = SamplingParams(temperature=0.0, repetition_penalty=1e300)
    (token,) = sampler(torch.tensor([[1.0, 0.0, 2.0]]), [SamplingRow(params, [1], [], None, None)])
    assert token.token_id == 2


@pytest.mark.parametrize("temperature", [1e38, 1e300])
def test_a_huge_temperature_samples_evenly_and_never_a_banned_token(temperature):
    """Past float32's largest the temperature is inf, and a banned token's -inf over inf is
    NaN: every token was NaN, and token 0 (here the banned end of text) was sampled."""
    sampler = Sampler(4, torch.device("cpu"), seed=0)
    params = SamplingParams(temperature=temperature, min_tokens=2)
    rows = [SamplingRow(params, [], [], 0, None)] * 300
    tokens = [
        t.token_id for t in sampler(torch.tensor([[5.0, 1.0, 2.0, 3.0]]).repeat(300, 1), rows)
    ]
    assert 0 not in tokens and set(tokens) == {1, 2, 3}
