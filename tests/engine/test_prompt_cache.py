"""The prompt cache's tiers under a real engine: a prefix the pool let go, a closed engine
left or a restart finds again is copied back, and the outputs are those of no cache at all."""

from __future__ import annotations

import logging
import shutil

import anyio
import pytest

from llmkit import LLM, SamplingParams
from llmkit.engine.sched import tiers
from llmkit.model.names import installed_gguf
from llmkit.models import ModelManager, ModelSettings

PARAMS = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True, logprobs=3)
PREFIX = [(7 * i) % 400 + 5 for i in range(80)]  # five blocks of 16


def _cold(path: str) -> LLM:
    return LLM(path, dtype="float32", max_model_len=128, enable_prefix_caching=False)


def _small(path: str, disk: str, blocks: int = 8) -> LLM:
    """An engine of ``blocks`` KV blocks (8: one tiny Llama request of 128 tokens)."""
    return LLM(
        path,
        dtype="float32",
        max_model_len=128,
        num_kv_blocks=blocks,
        max_num_batched_tokens=64,
        prompt_cache_dir=disk,
    )


def _per_request(llm: LLM) -> int:
    return llm._core.runner.kv_layout.blocks_per_sequence(128, 64, 16)


def _run(llm: LLM, prompt: list[int]) -> tuple[list[int], list[float], int]:
    out = llm.generate([prompt], PARAMS, use_tqdm=False)[0]
    done = out.outputs[0]
    assert done.logprobs is not None
    return (
        done.token_ids,
        [e[t].logprob for e, t in zip(done.logprobs, done.token_ids)],
        (out.num_cached_tokens),
    )


def _same(got: tuple[list[int], list[float], int], want: tuple[list[int], list[float], int]):
    assert got[0] == want[0]
    assert got[1] == pytest.approx(want[1], abs=1e-5)


def _restart() -> None:
    """What a new process would find: the disk tier, once every write has landed."""
    for store in tiers._STORES.values():
        store.flush()
    tiers._STORES.clear()


def _host_then_disk(path: str, disk_dir: str) -> int:
    """A prompt cold, from the host tier once two others filled the pool, and from the disk
    after a restart, each equal to no cache at all; returns the tokens the tiers gave."""
    prompt = [*PREFIX, 1, 2, 3]
    with _cold(path) as cold:
        want = _run(cold, prompt)
        blocks = 2 * _per_request(cold)  # two requests: a third evicts the first one's
    llm = _small(path, disk_dir, blocks)
    _same(_run(llm, prompt), want)
    for k in (11, 13):  # evict the prompt's blocks to the host tier (and the disk)
        _run(llm, [(k * i) % 400 + 5 for i in range(100)])
    host = _run(llm, prompt)
    _same(host, want)
    stats = llm.stats()
    llm.close()
    _restart()
    with _small(path, disk_dir, blocks) as again:
        disk = _run(again, prompt)
        assert again.stats().prompt_cache_disk_hit_tokens == disk[2]
    _same(disk, want)
    assert stats.prompt_cache_pool_hit_tokens + stats.prompt_cache_host_hit_tokens == host[2]
    assert host[2] == disk[2]
    return stats.prompt_cache_host_hit_tokens + disk[2]


@pytest.mark.parametrize("arch", ["llama", "gemma3_text", "gpt_oss", "qwen3_5_text"])
def test_restores_from_host_and_disk_equal_no_cache(model_factory, tmp_path, arch):
    assert _host_then_disk(model_factory(arch), str(tmp_path)) > 80


def test_restores_into_a_native_gguf_models_float16_cache_equal_no_cache(tmp_path):
    try:
        path = str(installed_gguf("smollm2"))
    except ValueError as e:
        pytest.skip(str(e))
    assert _host_then_disk(path, str(tmp_path)) > 80


def test_interleaved_conversations_never_get_each_others_blocks(model_factory, tmp_path):
    """Three conversations that share no prefix take turns on a pool that holds one: each
    turn resends its conversation so far and finds it in the pool or the host tier."""
    path = model_factory("llama")
    convos = [list(PREFIX), [(13 * i) % 400 + 5 for i in range(80)], list(range(5, 85))]
    turns = []
    with _cold(path) as cold:
        for turn in range(3):
            for c, convo in enumerate(convos):
                prompt = [*convo, 400 + turn, 410 + c]
                tokens, logprobs, _ = _run(cold, prompt)
                turns.append((prompt, tokens, logprobs))
                convo[:] = prompt + tokens
    with _small(path, str(tmp_path)) as llm:
        cached = []
        for prompt, tokens, logprobs in turns:
            got = _run(llm, prompt)
            _same(got, (tokens, logprobs, 0))
            cached.append(got[2])
        stats = llm.stats()
    assert cached[3:] == [80] * 6  # each later turn: the blocks the last one wrote whole
    assert stats.prompt_cache_host_hit_tokens > 0


def test_a_model_file_replaced_under_the_same_path_never_meets_its_old_entries(
    model_factory, tmp_path
):
    path = tmp_path / "model"
    shutil.copytree(model_factory("llama"), path)
    prompt = [*PREFIX, 9]
    with _small(str(path), str(tmp_path / "disk")) as llm:
        _run(llm, prompt)  # its blocks go to the tiers when the engine closes
    _restart()
    shutil.rmtree(path)
    shutil.copytree(model_factory("qwen2"), path)
    with _cold(str(path)) as cold:
        want = _run(cold, prompt)
    with _small(str(path), str(tmp_path / "disk")) as llm:
        got = _run(llm, prompt)
        assert got[2] == 0 and llm.stats().prompt_cache_host_hit_tokens == 0
    _same(got, want)


def test_a_truncated_disk_entry_is_recomputed_not_loaded(model_factory, tmp_path, caplog):
    path = model_factory("llama")
    prompt = [*PREFIX, 9]
    with _small(path, str(tmp_path)) as llm:
        want = _run(llm, prompt)
    _restart()
    entries = sorted(tmp_path.glob("*/*.kv"))
    assert len(entries) == 5
    victim = entries[2]
    victim.write_bytes(victim.read_bytes()[:100])
    with caplog.at_level(logging.WARNING), _small(path, str(tmp_path)) as llm:
        got = _run(llm, prompt)
    _same(got, want)
    assert "removed the disk entry" in caplog.text
    assert got[2] < 80  # the hit stops before the damaged block, computed again
    _restart()
    assert victim.stat().st_size > 100  # and written whole again when the engine closed


def test_an_unloaded_models_next_load_finds_its_prefixes(model_factory, tmp_path):
    settings = ModelSettings.of("tiny", model_factory("llama"), dtype="float32", max_model_len=128)
    prompt = [*PREFIX, 9]

    async def turn(models: ModelManager) -> int:
        async with await models.acquire("tiny") as engine:
            async for out in engine.generate({"prompt_token_ids": prompt}, PARAMS):
                cached = out.num_cached_tokens
        await models.unload("tiny")
        return cached

    async def main() -> tuple[int, int]:
        async with ModelManager([settings]) as models:
            return await turn(models), await turn(models)

    assert anyio.run(main) == (0, 80)
