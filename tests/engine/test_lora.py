"""LoRA adapters: greedy tokens equal HF transformers + peft, batched with the base model and
with each other; bad adapters are refused at load time; the prefix cache is keyed by adapter."""

from __future__ import annotations

import anyio
import peft
import pytest
import torch
import transformers

from llmkit import LLM, AsyncEngine, EngineConfig, LoRARequest, SamplingParams

MAX_TOKENS = 8
LENGTHS = [4, 19, 45, 70]
ADAPTERS = ["attn-r4", "all-r16", "some-r8"]
GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)


def _greedy(model, prompts: list[list[int]]) -> list[list[int]]:
    model.generation_config.eos_token_id = None  # like ignore_eos
    outs = []
    for ids in prompts:
        gen = model.generate(
            torch.tensor([ids]),
            max_new_tokens=MAX_TOKENS,
            do_sample=False,
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            pad_token_id=0,
        )
        outs.append(gen[0, len(ids) :].tolist())
    return outs


@pytest.fixture(scope="module")
def case(tiny_model, lora_factory):
    """The base model, its adapters as LoRARequests, prompts, and HF + peft's greedy tokens
    for each (None: the base model alone)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    words = "the engine serves a batch of prompts while the cache keeps every block " * 8
    ids = tokenizer.encode(words, add_special_tokens=False)
    prompts = [ids[i : i + n] for i, n in enumerate(LENGTHS)]
    loras = {name: LoRARequest(name, i + 1, lora_factory(name)) for i, name in enumerate(ADAPTERS)}
    expected = {}
    for name in [None, *ADAPTERS]:
        hf = transformers.AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
        if name is not None:
            hf = peft.PeftModel.from_pretrained(hf, loras[name].path)
        expected[name] = _greedy(hf.eval(), prompts)
    return tiny_model, loras, prompts, expected


def _mixed(case):
    """Every prompt under every adapter and none, interleaved in one batch."""
    _, loras, prompts, expected = case
    batch, lora_requests, want = [], [], []
    for i, prompt in enumerate(prompts):
        for name in [None, *ADAPTERS]:
            batch.append(prompt)
            lora_requests.append(None if name is None else loras[name])
            want.append(expected[name][i])
    return batch, lora_requests, want


def _tokens(outputs):
    return [o.outputs[0].token_ids for o in outputs]


def test_each_adapter_changes_the_output(case):
    _, _, _, expected = case
    for name in ADAPTERS:
        assert expected[name] != expected[None], name


@pytest.mark.parametrize(
    "settings",
    [
        dict(max_loras=3),
        # One slot for three adapters: steps take turns, slots are evicted and refilled.
        dict(max_loras=1, max_num_batched_tokens=40),
        dict(max_loras=2, max_num_batched_tokens=32, num_kv_blocks=16),
    ],
    ids=["one-batch", "chunked-one-slot", "preemption"],
)
def test_greedy_matches_peft_batched_with_the_base_model(case, settings):
    path = case[0]
    batch, lora_requests, want = _mixed(case)
    llm = LLM(path, max_model_len=256, enable_lora=True, max_lora_rank=16, **settings)
    assert _tokens(llm.generate(batch, GREEDY, use_tqdm=False, lora_request=lora_requests)) == want
    stats = llm.stats()
    if "num_kv_blocks" in settings:
        assert stats.num_preemptions > 0
        assert stats.kv_blocks_free == settings["num_kv_blocks"]
    if "max_num_batched_tokens" in settings:
        assert stats.steps > sum(len(p) for p in batch) // settings["max_num_batched_tokens"]


def test_attention_adapters_on_a_mixture_of_experts(model_factory, lora_factory):
    """A Qwen3-MoE's attention (and its dense layer's MLP) take adapters; its experts run
    as the base model's."""
    path, adapter = model_factory("qwen3_moe"), lora_factory("attn-r4", "qwen3_moe")
    prompts = [[5, 9, 200, 31, 7], list(range(3, 40))]
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    want = _greedy(peft.PeftModel.from_pretrained(hf, adapter).eval(), prompts)
    llm = LLM(path, max_model_len=256, enable_lora=True, max_lora_rank=16)
    request = LoRARequest("attn", 1, adapter)
    assert _tokens(llm.generate(prompts, GREEDY, use_tqdm=False, lora_request=request)) == want


def test_the_prefix_cache_is_keyed_by_adapter(case):
    path, loras, prompts, expected = case
    llm = LLM(path, max_model_len=256, enable_lora=True, max_loras=2, max_lora_rank=16)
    prompt = prompts[3]
    first = llm.generate(prompt, GREEDY, use_tqdm=False, lora_request=loras["attn-r4"])[0]
    assert first.outputs[0].token_ids == expected["attn-r4"][3]
    # The same text under another adapter, or none, finds nothing to reuse.
    for name in ["all-r16", None]:
        lora = None if name is None else loras[name]
        out = llm.generate(prompt, GREEDY, use_tqdm=False, lora_request=lora)[0]
        assert out.outputs[0].token_ids == expected[name][3]
        assert out.num_cached_tokens == 0
    again = llm.generate(prompt, GREEDY, use_tqdm=False, lora_request=loras["attn-r4"])[0]
    assert again.outputs[0].token_ids == expected["attn-r4"][3]
    assert again.num_cached_tokens > 0


@pytest.fixture(scope="module")
def lora_llm(tiny_model):
    return LLM(tiny_model, max_model_len=256, enable_lora=True, max_lora_rank=8)


def test_bad_adapters_are_refused_at_load_time(
    lora_llm, lora_factory, model_factory, make_lora, tmp_path
):
    def refused(lora: LoRARequest, match: str) -> None:
        with pytest.raises(ValueError, match=match):
            lora_llm.generate("hello", GREEDY, use_tqdm=False, lora_request=lora)

    refused(LoRARequest("big", 1, lora_factory("all-r16")), "rank 16, more than max_lora_rank=8")
    base = model_factory("llama")
    head = make_lora(base, tmp_path / "head", 4, ["q_proj", "lm_head"], seed=0)
    refused(LoRARequest("head", 2, head), "targets lm_head: unsupported target module")
    other = make_lora(model_factory("qwen3"), tmp_path / "qwen3", 4, ["k_proj"], seed=0)
    refused(LoRARequest("other", 3, other), "does not fit the base model")
    refused(LoRARequest("missing", 4, str(tmp_path / "nowhere")), "not a PEFT adapter folder")
    small = LoRARequest("small", 5, lora_factory("attn-r4"))
    lora_llm.generate("hello", GREEDY, use_tqdm=False, lora_request=small)
    refused(LoRARequest("small", 5, str(tmp_path)), "already adapter 'small'")
    # Nothing was left queued by the refusals.
    assert lora_llm.stats().num_waiting == lora_llm.stats().num_running == 0


def test_an_engine_without_lora_refuses_adapters(tiny_model, lora_factory):
    llm = LLM(tiny_model, max_model_len=256)
    lora = LoRARequest("a", 1, lora_factory("attn-r4"))
    with pytest.raises(ValueError, match="enable_lora=True"):
        llm.generate("hello", GREEDY, use_tqdm=False, lora_request=lora)


def test_lora_settings_are_checked():
    with pytest.raises(ValueError, match="max_loras must be an integer >= 1"):
        EngineConfig("demo", max_loras=0)
    with pytest.raises(ValueError, match="id must be an integer >= 1"):
        LoRARequest("a", 0, "/tmp")


@pytest.mark.anyio
async def test_async_engine_runs_adapters_side_by_side(case):
    path, loras, prompts, expected = case
    config = EngineConfig(path, max_model_len=256, enable_lora=True, max_loras=2)
    async with AsyncEngine(config) as engine:
        await engine.add_lora(loras["attn-r4"])
        results: dict[str | None, list[int]] = {}

        async def run(name: str | None) -> None:
            lora = None if name is None else loras[name]
            async for out in engine.generate(prompts[2], GREEDY, lora_request=lora):
                results[name] = out.outputs[0].token_ids

        async with anyio.create_task_group() as tg:
            for name in [None, "attn-r4", "some-r8"]:
                tg.start_soon(run, name)
        assert results == {name: expected[name][2] for name in results}
        assert await engine.remove_lora(loras["attn-r4"].id)
        assert not await engine.remove_lora(99)
        with pytest.raises(ValueError, match="not a PEFT adapter folder"):
            await engine.add_lora(LoRARequest("nope", 7, "/nonexistent"))
