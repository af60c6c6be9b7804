"""A hybrid model's recurrent state beside the KV cache, through the engine: a conversation's
next turn resumes from a checkpoint, every slot comes back, several completions of one
prompt and beam search keep their states apart, and speculative decoding is refused."""

from __future__ import annotations

import time

import pytest

from llmkit import LLM, SamplingParams
from llmkit.engine.beam_search import BeamSearchParams
from llmkit.model.demo import ModelSpec

GREEDY = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
FIRST = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
LONG = ModelSpec(
    architecture="qwen3_5_text", head_dim=16, num_layers=4, max_position_embeddings=4096
)


def _ttft(llm: LLM, messages: list[dict[str, str]]) -> float:
    """Seconds to the first token of the chat, best of two (a busy machine's noise)."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        llm.chat(messages, FIRST, use_tqdm=False)
        times.append(time.perf_counter() - start)
    return min(times)


def test_a_conversations_next_turn_resumes_from_the_cached_state(model_factory):
    path = model_factory(LONG)
    cached = LLM(path, max_model_len=3072)
    cold = LLM(path, max_model_len=3072, enable_prefix_caching=False)
    words = "the engine serves a batch of prompts while the cache keeps every block".split()
    question = " ".join(words[i % len(words)] for i in range(1340))
    turn1 = [{"role": "user", "content": question}]
    reply = cached.chat(turn1, GREEDY, use_tqdm=False)[0]
    assert len(reply.prompt_token_ids) > 2300
    turn2 = [
        *turn1,
        {"role": "assistant", "content": reply.outputs[0].text},
        {"role": "user", "content": "and then what happened to the cache"},
    ]
    warm_tokens = cached.chat(turn2, GREEDY, use_tqdm=False)[0]
    cold_tokens = cold.chat(turn2, GREEDY, use_tqdm=False)[0]
    assert len(warm_tokens.prompt_token_ids) > 2400
    assert warm_tokens.outputs[0].token_ids == cold_tokens.outputs[0].token_ids
    # It resumed past the first turn's prompt, not from the start.
    assert warm_tokens.num_cached_tokens >= len(reply.prompt_token_ids) - 16
    assert cold_tokens.num_cached_tokens == 0
    assert _ttft(cached, turn2) < _ttft(cold, turn2) / 3


def test_every_state_slot_comes_back_and_siblings_keep_their_own(model_factory):
    llm = LLM(model_factory("qwen3_5_text"), max_model_len=512, max_num_seqs=4)
    states = llm._core.allocator.states
    assert states is not None and states.num_slots == 12  # live, trailing, one more each
    prompt = list(range(1, 60))
    alone = llm.generate([prompt], GREEDY, use_tqdm=False)[0].outputs[0].token_ids
    # Three greedy completions at once (siblings in the same steps) and more requests than
    # run at once: each reads and writes its own slot.
    three = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, n=3)
    out = llm.generate([prompt, list(range(5, 40))] * 3, three, use_tqdm=False)
    assert all(c.token_ids == alone for o in out[::2] for c in o.outputs)
    assert states.num_free_slots + states.num_checkpoints == states.num_slots


def test_beam_search_on_a_hybrid_matches_it_without_the_prefix_cache(model_factory):
    path = model_factory("qwen3_5_text")
    params = BeamSearchParams(beam_width=3, max_tokens=8, ignore_eos=True)
    prompts = [list(range(1, 40)), list(range(100, 120))]
    ours = LLM(path, max_model_len=512).beam_search(prompts, params)
    plain = LLM(path, max_model_len=512, enable_prefix_caching=False).beam_search(prompts, params)
    assert [[b.tokens for b in o.sequences] for o in ours] == [
        [b.tokens for b in o.sequences] for o in plain
    ]


def test_speculative_decoding_on_a_hybrid_is_refused_at_start(model_factory):
    ngram = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}
    with pytest.raises(ValueError, match="speculative decoding does not run on Qwen3_5"):
        LLM(model_factory("qwen3_5_text"), speculative_config=ngram)
