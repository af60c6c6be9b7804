"""Admission control in AsyncEngine: queue limits refuse before tokenizing; overdue waits fail."""

from __future__ import annotations

import anyio
import pytest

from llmkit import AsyncEngine, EngineConfig, EngineOverloadedError, SamplingParams
from llmkit.engine.sched.admission import AdmissionQueue

pytestmark = pytest.mark.anyio

SHORT = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
LONG = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def _running(engine: AsyncEngine, count: int) -> None:
    with anyio.fail_after(10):
        while engine.stats().num_running < count:
            await anyio.sleep(0.005)


async def _collect(stream):
    last = None
    async for out in stream:
        last = out
    return last


async def _settled(engine: AsyncEngine) -> None:
    with anyio.fail_after(10):
        while True:
            s = engine.stats()
            if not (s.num_running or s.num_waiting or s.num_queued) and (
                s.kv_blocks_free == s.kv_blocks_total
            ):
                return
            await anyio.sleep(0.01)


async def test_a_full_queue_refuses_before_tokenizing_and_admits_again_once_it_moves(tiny_model):
    config = EngineConfig(tiny_model, max_model_len=512, max_num_seqs=1, max_queued_requests=2)
    async with AsyncEngine(config) as engine:
        running = engine.generate("long one", LONG)
        await _running(engine, 1)
        waiting = [engine.generate(f"waiting {i}", SHORT) for i in range(2)]
        assert engine._core.queue.requests == 2

        def no_tokenizing(*args, **kwargs):
            raise AssertionError("a refused request was tokenized")

        engine._processor.process = no_tokenizing  # type: ignore[method-assign]
        engine._processor.render_chat = no_tokenizing  # type: ignore[method-assign]
        with pytest.raises(EngineOverloadedError) as refused:
            engine.generate("one too many", SHORT)
        assert refused.value.reason == "queued_requests"
        assert refused.value.retry_after_s > 0
        with pytest.raises(EngineOverloadedError):
            engine.chat([{"role": "user", "content": "hi"}], SHORT)
        del engine._processor.process, engine._processor.render_chat

        await running.aclose()  # the queue moves: both waiting requests run and finish
        for stream in waiting:
            assert (await _collect(stream)).outputs[0].finish_reason == "length"
        assert len((await _collect(engine.generate("admitted", SHORT))).outputs[0].token_ids) == 4
        await _settled(engine)
        assert engine.stats().queue_wait_count >= 3


async def test_queued_tokens_limit(tiny_model):
    config = EngineConfig(tiny_model, max_model_len=512, max_num_seqs=1, max_queued_tokens=8)
    async with AsyncEngine(config) as engine:
        running = engine.generate("long one", LONG)
        await _running(engine, 1)
        ids = list(range(5, 11))  # 6 tokens wait; 6 more would pass 8
        first = engine.generate(ids, SHORT)
        with pytest.raises(EngineOverloadedError) as refused:
            engine.generate(ids, SHORT)
        assert refused.value.reason == "queued_tokens"
        await running.aclose()
        await _collect(first)
        await _settled(engine)


async def test_requests_that_wait_past_max_queue_wait_fail_and_free_everything(tiny_model):
    config = EngineConfig(tiny_model, max_model_len=512, max_num_seqs=1, max_queue_wait_s=0.3)
    async with AsyncEngine(config) as engine:
        running = engine.generate("long one", LONG)
        await _running(engine, 1)
        stuck = engine.generate("stuck behind it", SHORT)
        with pytest.raises(EngineOverloadedError) as failed:
            await _collect(stuck)
        assert failed.value.reason == "queue_wait"
        assert "max_queue_wait_s=0.3" in str(failed.value)
        out = await _collect(running)  # the request that ran is not touched
        assert len(out.outputs[0].token_ids) == 400
        await _settled(engine)


def test_admission_queue_counts_and_histogram():
    queue = AdmissionQueue(max_requests=2, max_tokens=None)
    queue.reserve(3)
    queue.enter("a", 0.0, 3)
    queue.reserve(4)
    queue.enter("b", 1.0, 4)
    with pytest.raises(EngineOverloadedError):
        queue.check()
    assert [rid for rid, _ in queue.overdue(1.5, 2.0)] == ["a"]
    queue.started("a", 0.2)
    queue.started("a", 5.0)  # counted once
    queue.ended("b")
    assert (queue.requests, queue.tokens, queue.wait_count) == (0, 0, 1)
    assert queue.wait_buckets()[-1] == 1
    assert queue.wait_sum == pytest.approx(0.2)
