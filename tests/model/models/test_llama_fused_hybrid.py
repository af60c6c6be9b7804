"""The fused decode step on hybrids (Qwen3.5): Gated DeltaNet layers and gated attention in the
one C call, against the same layers run as modules, and the checkpoints it writes."""

from __future__ import annotations

import pytest

from llmkit import LLM, SamplingParams
from llmkit.model.models import llama_fused

pytestmark = pytest.mark.skipif(
    llama_fused.load() is None, reason="the fused decode kernel does not build here (no AVX2)"
)
PROMPTS = [list(range(1, 40)), [1, 700, 12, 5], list(range(200, 260))]
GREEDY = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True, logprobs=0)


def _decoded(llm: LLM) -> list[tuple[list[int], list[float]]]:
    out = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
    return [
        (list(c.token_ids), [d[t].logprob for t, d in zip(c.token_ids, c.logprobs)])
        for c in (o.outputs[0] for o in out)
    ]


def _file(model_factory, tmp_path) -> str:
    from tests.model.gguf.test_gguf_archs import write_gguf

    return str(write_gguf(model_factory("qwen3_5_moe_text"), tmp_path / "moe.gguf", "Q8_0"))


@pytest.mark.parametrize("source", ["w4a8", "gguf"])
def test_a_hybrids_decode_steps_equal_its_layers_run_as_modules(source, model_factory, tmp_path):
    """w4a8 weights of the dense model; a GGUF file's Q8_0 mixture of experts with a shared
    expert and value heads in the file's tiled order. Every decode row's state is its slot's;
    a decode step crossing a block boundary writes the trailing checkpoint."""
    if source == "w4a8":
        llm = LLM(model_factory("qwen3_5_text"), quantization="w4a8", max_model_len=512)
    else:
        llm = LLM(_file(model_factory, tmp_path), max_model_len=512)
    fused = llm._core.runner.model.model.fused_decode
    got = _decoded(llm)
    assert fused._plan is not None and sum(m is not None for m in fused._plan.mixers) == 3
    fused.enabled = False
    want = _decoded(llm)
    for (tokens, logprobs), (their_tokens, theirs) in zip(got, want):
        assert tokens == their_tokens
        assert max(abs(a - b) for a, b in zip(logprobs, theirs)) < 5e-2
    llm.close()


def test_a_checkpoint_the_fused_step_wrote_resumes_a_longer_prompt(model_factory, tmp_path):
    file = _file(model_factory, tmp_path)
    llm, cold = LLM(file, max_model_len=512), LLM(file, max_model_len=512)
    cold._core.runner.model.model.fused_decode.enabled = False
    first = llm.generate(PROMPTS[:1], GREEDY, use_tqdm=False)[0]
    # 39 prompt tokens, 11 decoded: the decode of position 47 crossed the boundary at 48.
    longer = [*PROMPTS[0], *first.outputs[0].token_ids, 5, 6, 7]
    resumed = llm.generate([longer], GREEDY, use_tqdm=False)[0]
    assert resumed.num_cached_tokens == 48
    plain = cold.generate([longer], GREEDY, use_tqdm=False)[0]
    assert resumed.outputs[0].token_ids == plain.outputs[0].token_ids
