"""Continuous batching: budgets, chunked prefill, priorities, preemption. No model needed."""

from __future__ import annotations

import pytest

from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.scheduler import Scheduler


def _sched(num_blocks=64, block_size=4, max_seqs=8, budget=32, chunked=True):
    alloc = BlockAllocator(num_blocks, block_size, enable_prefix_caching=False)
    return Scheduler(alloc, max_seqs, budget, chunked), alloc


def _run_step(sched, out, token=0):
    """A step whose model samples ``token`` for every request that samples."""
    for req in sched.advance(out):
        req.output_token_ids.append(token)


def test_decodes_and_prefill_chunks_share_the_token_budget():
    sched, _ = _sched(budget=16)
    a, b = Request("a", list(range(10))), Request("b", list(range(40)))
    sched.add(a)
    sched.add(b)
    out = sched.schedule()
    assert [r.request_id for r in out.requests] == ["a", "b"]
    assert out.num_new_tokens == [10, 6]  # b's prompt is chunked to fit
    _run_step(sched, out)
    out = sched.schedule()
    assert out.num_new_tokens == [1, 15]  # a decodes, b continues its prefill
    assert out.total_tokens <= 16


def test_without_chunked_prefill_a_long_prompt_waits_for_a_whole_step():
    sched, _ = _sched(budget=16, chunked=False)
    sched.add(Request("a", list(range(10))))
    sched.add(Request("b", list(range(12))))
    out = sched.schedule()
    assert [r.request_id for r in out.requests] == ["a"]
    assert sched.num_waiting == 1


def test_sequence_budget_caps_running_requests():
    sched, _ = _sched(max_seqs=2)
    for i in range(4):
        sched.add(Request(str(i), [1, 2, 3]))
    out = sched.schedule()
    assert len(out.requests) == 2 and sched.num_waiting == 2


def test_priority_orders_admission_then_arrival():
    sched, _ = _sched(max_seqs=1)
    sched.add(Request("late-low", [1], priority=5))
    sched.add(Request("urgent", [1], priority=-1))
    sched.add(Request("normal", [1]))
    assert sched.schedule().requests[0].request_id == "urgent"


def test_preemption_frees_the_newest_and_requeues_it_first():
    sched, alloc = _sched(num_blocks=4, block_size=4, budget=64)
    a, b = Request("a", list(range(7))), Request("b", list(range(8)))
    sched.add(a)
    sched.add(b)
    _run_step(sched, sched.schedule())  # a: 2 blocks, b: 2 blocks -> pool full
    out = sched.schedule()  # b's 9th token needs a 3rd block: b, the newest, yields
    assert out.preempted == [b] and b.status is RequestStatus.PREEMPTED
    assert b.num_computed_tokens == 0 and b.output_token_ids  # its output is kept
    assert out.requests == [a]
    _run_step(sched, out)
    out = sched.schedule()  # a's 9th token: the pool is a's alone now
    assert out.requests == [a] and not out.preempted
    sched.finish(a, RequestStatus.FINISHED_STOPPED)
    out = sched.schedule()
    assert out.requests == [b] and out.num_new_tokens == [b.num_tokens]  # recomputed whole
    sched.finish(b, RequestStatus.FINISHED_LENGTH)
    assert alloc.num_free_blocks == 4


def test_finishing_a_waiting_request_drops_it_from_the_queue():
    sched, _ = _sched(max_seqs=1)
    a, b = Request("a", [1]), Request("b", [1])
    sched.add(a)
    sched.add(b)
    sched.finish(b, RequestStatus.FINISHED_ABORTED)
    assert sched.num_waiting == 1
    assert sched.schedule().requests == [a]
    assert sched.num_waiting == 0 and not sched.schedule().requests[1:]


def test_request_status_machine_rejects_illegal_moves():
    r = Request("r", [1])
    with pytest.raises(RuntimeError):
        r.set_status(RequestStatus.PREEMPTED)
    r.set_status(RequestStatus.RUNNING)
    r.set_status(RequestStatus.FINISHED_STOPPED)
    assert r.finish_reason == "stop"
    with pytest.raises(RuntimeError):
        r.set_status(RequestStatus.RUNNING)


def test_a_step_holds_at_most_max_loras_adapters():
    alloc = BlockAllocator(64, 4, enable_prefix_caching=False)
    sched = Scheduler(alloc, 8, 32, max_loras=2)
    for rid, lora in [("a1", 1), ("b", 2), ("c", 3), ("base", 0), ("a2", 1)]:
        sched.add(Request(rid, [1, 2, 3], lora_id=lora))
    out = sched.schedule()
    # c's adapter would be a third: it waits, and those behind it still run.
    assert [r.request_id for r in out.requests] == ["a1", "b", "base", "a2"]
    assert sched.num_waiting == 1
    for req in list(sched.running):
        if req.lora_id == 2:
            sched.finish(req, RequestStatus.FINISHED_STOPPED)
    _run_step(sched, out)
    out = sched.schedule()
    assert {r.request_id for r in out.requests} == {"a1", "base", "a2", "c"}


def test_a_request_that_cannot_fit_even_alone_is_handed_back_unfit():
    # 4 blocks of 4 tokens: 16 tokens in all.
    whole = Scheduler(BlockAllocator(4, 4), max_num_seqs=4, max_num_batched_tokens=64)
    whole.add(Request("big", list(range(20))))
    whole.add(Request("small", list(range(6))))
    out = whole.schedule()
    assert [r.request_id for r in out.unfit] == ["big"]
    assert [r.request_id for r in out.requests] == ["small"]
    # Chunked: the first chunks fit, and then the request alone runs the pool dry.
    chunked = Scheduler(BlockAllocator(4, 4), max_num_seqs=4, max_num_batched_tokens=8)
    big = Request("big", list(range(20)))
    chunked.add(big)
    for _ in range(2):
        out = chunked.schedule()
        assert out.requests == [big] and not out.unfit
        chunked.advance(out)
    out = chunked.schedule()
    assert out.unfit == [big] and not out.requests and not out.preempted
