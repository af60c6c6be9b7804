"""The whole engine on the Triton backend (interpreted on CPU) gives the torch backend's tokens."""

from __future__ import annotations

from llmkit import LLM, SamplingParams


def test_triton_backend_matches_torch_backend_greedy(tiny_model):
    prompts = ["Hello", "The quick brown fox jumps", list(range(10, 47))]
    params = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    # A fixed cache: on a GPU the first engine would otherwise take most of its memory.
    small = dict(num_kv_blocks=64, max_model_len=256)
    expected = LLM(tiny_model, attention_backend="torch", **small).generate(
        prompts, params, use_tqdm=False
    )
    llm = LLM(tiny_model, attention_backend="triton", max_num_batched_tokens=32, **small)
    assert llm._core.runner.backend.name == "triton"
    got = llm.generate(prompts, params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in expected]
