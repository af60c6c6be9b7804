"""Nothing one request carries can wedge the engine: a request that cannot be added, or
that fails in a step, fails alone; the counts stay true; a stalled loop shows in health.

The P0 this guards: a seed of 2**64 passed validation, the core registered the request
before ``manual_seed`` raised, and a later abort drove the waiting count to -1, after which
the step loop slept for good while /health said 200.
"""

from __future__ import annotations

import logging
import time

import anyio
import pytest

from llmkit import (
    LLM,
    AsyncEngine,
    EngineConfig,
    RequestFailedError,
    RequestOutputKind,
    SamplingParams,
)
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.scheduler import Scheduler

pytestmark = pytest.mark.anyio

GREEDY = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


def _unaddable(kind: RequestOutputKind = RequestOutputKind.CUMULATIVE) -> SamplingParams:
    """Parameters that slipped past validation and fail in the core (the P0's seed)."""
    params = SamplingParams(temperature=1.0, max_tokens=8, seed=1, output_kind=kind)
    params.seed = 2**64
    return params


def test_seeds_outside_a_64_bit_generator_are_refused_up_front():
    with pytest.raises(ValueError, match="seed"):
        SamplingParams(seed=2**64)
    with pytest.raises(ValueError, match="seed"):
        SamplingParams(seed=-(2**63) - 1)
    # The edges are valid, and n > 1 derives its siblings' seeds without leaving the range.
    SamplingParams(seed=-(2**63))
    SamplingParams(seed=2**64 - 1, n=3)


async def test_a_request_the_core_cannot_add_fails_alone(tiny_model):
    async with AsyncEngine(EngineConfig(tiny_model, max_model_len=128)) as engine:
        bad = engine.generate("hello", _unaddable())
        with anyio.fail_after(5), pytest.raises(RequestFailedError, match="could not add"):
            async for _ in bad:
                pass
        await engine.abort(bad.request_id)  # the client's abort of it changes nothing
        for _ in range(3):
            with anyio.fail_after(5):
                outputs = [out async for out in engine.generate("hello", GREEDY)]
            assert len(outputs[-1].outputs[0].token_ids) == 8
        with anyio.fail_after(5):  # the stats snapshot follows the step that ended them
            while (s := engine.stats()).num_running or s.num_waiting or s.num_queued:
                assert s.num_waiting >= 0 and s.num_queued >= 0
                await anyio.sleep(0.01)
        assert engine.is_healthy()


def test_llm_reports_the_failed_request_and_runs_the_next_batch(tiny_model):
    llm = LLM(tiny_model, max_model_len=128)
    with pytest.raises(RequestFailedError, match="could not add"):
        llm.generate(["a", "b"], [GREEDY, _unaddable(RequestOutputKind.FINAL_ONLY)], use_tqdm=False)
    out = llm.generate(["a", "b"], GREEDY, use_tqdm=False)
    assert [len(o.outputs[0].token_ids) for o in out] == [8, 8]
    stats = llm.stats()
    assert stats.num_waiting == stats.num_running == stats.num_queued == 0


def test_a_failure_in_one_requests_step_work_fails_that_request_alone(tiny_model):
    llm = LLM(tiny_model, max_model_len=128)
    core = llm._core
    states = []
    for i in range(3):
        state, requests = llm._processor.process("hello there", GREEDY, f"r{i}")
        core.queue.reserve(len(state.prompt_token_ids))
        core.add(state, requests)
        states.append(state)

    def broken_update(*args, **kwargs):
        raise RuntimeError("detokenizer exploded")

    detokenizer = states[1].completions[0].detokenizer
    assert detokenizer is not None
    detokenizer.update = broken_update  # type: ignore[method-assign]
    deadline = time.monotonic() + 10
    while core.has_work() and time.monotonic() < deadline:
        core.step()
    assert not core.has_work()
    assert states[1].error is not None and "detokenizer exploded" in states[1].error
    for state in (states[0], states[2]):
        assert state.error is None and state.finished
        assert len(state.completions[0].token_ids) == 8
    assert core.scheduler.num_waiting == 0 and core.allocator.num_free_blocks == (
        core.allocator.num_blocks
    )


def test_the_scheduler_counts_only_what_it_holds(tiny_model):
    llm = LLM(tiny_model, max_model_len=128)
    sched = Scheduler(llm._core.allocator, max_num_seqs=4, max_num_batched_tokens=64)
    held, stranger = Request("held", [1, 2, 3]), Request("stranger", [1, 2])
    sched.add(held)
    sched.finish(held, RequestStatus.FINISHED_ABORTED)
    sched.finish(held, RequestStatus.FINISHED_ABORTED)  # a second finish changes nothing
    assert sched.num_waiting == 0 and not sched.has_work()
    with pytest.raises(AssertionError, match="not in the scheduler"):
        sched.finish(stranger, RequestStatus.FINISHED_ABORTED)
    assert sched.num_waiting == 0
    sched.add(Request("next", [1, 2, 3]))
    assert sched.num_waiting == 1 and sched.has_work()


async def test_a_stalled_step_loop_reports_unhealthy_and_recovers(tiny_model, caplog):
    config = EngineConfig(tiny_model, max_model_len=512, watchdog_timeout_s=0.3)
    caplog.set_level(logging.INFO, logger="llmkit.engine.core.watchdog")
    async with AsyncEngine(config) as engine:
        stream = engine.generate("hello", SamplingParams(max_tokens=300, ignore_eos=True))
        await stream.__anext__()
        assert engine.is_healthy()
        # The core thread stuck between steps while it holds a running request.
        engine._commands.submit(lambda core: time.sleep(1.5))
        with anyio.fail_after(5):
            while engine.is_healthy():
                await anyio.sleep(0.05)
            while not engine.is_healthy():
                await anyio.sleep(0.05)
            while not any("engine recovered" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.05)
        await stream.aclose()
    messages = [r.getMessage() for r in caplog.records]
    assert any("engine stalled: it holds 1 requests" in m for m in messages), messages
