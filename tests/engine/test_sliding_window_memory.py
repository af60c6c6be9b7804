"""Sliding-window layers keep only the KV blocks their window reaches (model/kv_layout.py):
a long context costs the whole-context layers' blocks plus a window, and the tokens are
those of a model that keeps everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmkit import LLM, SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
# gpt-oss's tiny model: one 16-token window layer, one whole-context layer.
PROMPTS = [list(range(5, 505)), list(range(9, 309)), [*range(5, 405), 77, 78]]


def _tokens(llm: LLM) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in llm.generate(PROMPTS, GREEDY, use_tqdm=False)]


def test_a_long_context_fits_in_the_memory_of_its_full_layers_plus_a_window(model_factory):
    path = model_factory("gpt_oss")
    kw = {"max_model_len": 512, "max_num_batched_tokens": 64}
    expected = _tokens(LLM(path, disable_hybrid_kv_cache_manager=True, **kw))
    config = json.loads((Path(path) / "config.json").read_text())
    # 16 tokens of one layer's float32 K and V; the memory of 40 of them, 20 of both layers,
    # is less than a 512-token sequence needs on every layer (32 blocks of both) ...
    layer_block = 2 * 16 * config["num_key_value_heads"] * config["head_dim"] * 4
    kw["cpu_kv_cache_gib"] = 40 * layer_block / (1 << 30)
    with pytest.raises(ValueError, match="fewer than one sequence"):
        LLM(path, disable_hybrid_kv_cache_manager=True, **kw)
    # ... but room for its 32 whole-context blocks and the window layer's few. The prompts
    # preempt each other, and the last finds the first's prefix cached.
    hybrid = LLM(path, **kw)
    assert _tokens(hybrid) == expected
    stats = hybrid.stats()
    assert stats.kv_blocks_free == stats.kv_blocks_total == 40
    assert stats.prefix_cache_hit_rate > 0
