"""The paths beside plain decoding on a CUDA GPU: GGUF files (dequantized to the model's
dtype), speculative decoding (n-gram and a draft model) and beam search, each against
the same request on the CPU or without the path, in float32.

Skipped without CUDA (CI has none); run on a GPU machine with ``pytest tests/gpu``.
"""

from __future__ import annotations

import logging

import pytest
import torch
from tests.model.gguf.test_gguf_archs import write_gguf

from llmkit import LLM, BeamSearchParams, SamplingParams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CUDA = dict(device="cuda", dtype="float32", max_model_len=512, num_kv_blocks=256, max_num_seqs=16)
CPU = dict(device="cpu", dtype="float32", max_model_len=512)
PROMPTS = [[(11 * i + 7 * j) % 800 + 10 for j in range(n)] for i, n in enumerate((3, 20, 70))]
GREEDY = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)


def _tokens(outputs) -> list[list[int]]:
    return [list(o.outputs[0].token_ids) for o in outputs]


@pytest.mark.parametrize("qtype", ["Q8_0", "mix"])
def test_a_gguf_file_serves_on_cuda_what_it_serves_on_cpu(tiny_model, tmp_path, qtype, caplog):
    mix = {"attn_v": "Q8_0", "ffn_down": "Q5_1"}

    def kind(name: str) -> str:
        return next((t for part, t in mix.items() if part in name), "Q4_0")

    path = write_gguf(tiny_model, tmp_path / "m.gguf", qtype if qtype == "Q8_0" else kind)
    with caplog.at_level(logging.INFO, logger="llmkit"):
        cuda = LLM(str(path), **CUDA)
    assert cuda._core.runner.device.type == "cuda"
    assert "dequantized" in caplog.text  # the log says what the load costs
    cpu = LLM(str(path), **CPU)  # an explicit dtype dequantizes on CPU too
    assert _tokens(cuda.generate(PROMPTS, GREEDY, use_tqdm=False)) == _tokens(
        cpu.generate(PROMPTS, GREEDY, use_tqdm=False)
    )


@pytest.mark.parametrize("method", ["ngram", "draft_model"])
def test_speculative_decoding_on_cuda_gives_the_targets_greedy_tokens(tiny_model, method):
    spec = {"method": method, "num_speculative_tokens": 3}
    if method == "ngram":
        spec["prompt_lookup_max"] = 3
    else:
        spec["model"] = tiny_model  # the target as its own draft: every proposal holds
    # Echoed text, so n-gram proposals are found and accepted.
    prompts = [PROMPTS[0], [5, 6, 7, 8] * 10, PROMPTS[2]]
    plain = LLM(tiny_model, **CUDA)
    expected = _tokens(plain.generate(prompts, GREEDY, use_tqdm=False))
    del plain
    llm = LLM(tiny_model, speculative_config=spec, **CUDA)
    assert not llm._core.async_scheduling  # its proposals are checked on the host
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False)) == expected
    assert llm.stats().spec_num_accepted_tokens > 0


def test_beam_search_on_cuda_equals_the_cpus(tiny_model):
    params = BeamSearchParams(beam_width=4, max_tokens=6, ignore_eos=True)
    prompts = [{"prompt_token_ids": p} for p in PROMPTS]

    def beams(llm: LLM) -> list[list[list[int]]]:
        return [[b.tokens for b in out.sequences] for out in llm.beam_search(prompts, params)]

    assert beams(LLM(tiny_model, **CUDA)) == beams(LLM(tiny_model, **CPU))
