"""A check the family tests share: llmkit's greedy tokens and prompt logprobs against the
logits of a transformers model on the same weights."""

from __future__ import annotations

import pytest
import torch

from llmkit import LLM, SamplingParams


def assert_answers_as_hf(llm: LLM, hf, prompts: list[list[int]], max_tokens: int, tol: float):
    """Greedy tokens equal ``hf``'s argmax, every prompt token's logprob within ``tol``."""
    params = SamplingParams(
        temperature=0.0, max_tokens=max_tokens, ignore_eos=True, prompt_logprobs=0
    )
    for prompt, out in zip(prompts, llm.generate(prompts, params, use_tqdm=False)):
        full = prompt + list(out.outputs[0].token_ids)
        with torch.no_grad():
            ref = torch.log_softmax(hf(input_ids=torch.tensor([full])).logits[0].float(), -1)
        assert out.outputs[0].token_ids == ref[len(prompt) - 1 : -1].argmax(-1).tolist()
        for pos in range(1, len(prompt)):
            got = out.prompt_logprobs[pos][prompt[pos]].logprob
            assert got == pytest.approx(ref[pos - 1, prompt[pos]].item(), abs=tol)
