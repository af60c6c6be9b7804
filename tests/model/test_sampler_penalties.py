"""The sampler's repetition penalty at its edge: a penalty so small that a seen token's logit
divided by it overflows float32 (or the penalty itself rounds to 0) still samples a seen
token, as a small one does, and never a token a mask or grammar ruled out."""

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
