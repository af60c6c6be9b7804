"""A hybrid model's recurrent state slots: a live one per running request, checkpoints at block
boundaries kept with the prefix cache, every slot coming back."""

from __future__ import annotations

from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request
from llmkit.model.state_ops import NO_SLOT, StateOps


def _alloc(slots: int = 9, blocks: int = 32) -> BlockAllocator:
    return BlockAllocator(blocks, block_size=4, state_slots=slots)


def _prefill(alloc: BlockAllocator, req: Request) -> StateOps:
    """Schedule ``req`` as the scheduler does (prefix hit first) and run its prompt."""
    cached = alloc.find_cached(req)
    assert alloc.allocate(req, req.num_tokens - len(cached[0]) * alloc.block_size, cached)
    ops = alloc.state_ops(req)
    assert ops is not None and alloc.states is not None
    alloc.states.commit()
    req.num_computed_tokens = req.num_tokens
    return ops


def _decode(alloc: BlockAllocator, req: Request, token: int) -> StateOps:
    req.output_token_ids.append(token)
    assert alloc.allocate(req, 1)
    ops = alloc.state_ops(req)
    assert ops is not None and alloc.states is not None
    alloc.states.commit()
    req.num_computed_tokens += 1
    return ops


def test_a_fresh_request_zeroes_its_slot_and_checkpoints_its_prompts_last_block():
    alloc = _alloc()
    a = Request("a", list(range(10)))
    ops = _prefill(alloc, a)
    # 10 prompt tokens, blocks of 4: a request with this prompt resumes after 8 at most.
    assert ops.init == NO_SLOT and ops.save_at == 8 and ops.save_slot not in (NO_SLOT, ops.slot)
    b = Request("b", list(range(10)))
    hit = _prefill(alloc, b)
    assert b.num_computed_tokens == 10 and hit.init == ops.save_slot and hit.slot != ops.slot
    assert alloc.find_cached(Request("c", [*range(9), 99])) == [alloc.block_ids(a)[:2]]


def test_a_checkpoint_is_found_only_after_its_step_has_run():
    alloc = _alloc()
    a, b = Request("a", list(range(10))), Request("b", list(range(10)))
    assert alloc.allocate(a, 10)  # scheduled, its step not run yet: its blocks are named
    assert alloc.find_cached(b) == [[]]  # but the state after them is not written yet
    assert alloc.states is not None
    alloc.states.commit()
    assert len(alloc.find_cached(b)[0]) == 2


def test_a_finished_conversation_resumes_from_its_last_decoded_boundary():
    alloc = _alloc()
    a = Request("a", list(range(10)))
    _prefill(alloc, a)
    saves = [_decode(alloc, a, 100 + i) for i in range(7)]  # computes tokens 10..16
    # Boundaries 12 and 16 pass in decode: the trailing slot holds the latest.
    trailing = {op.save_slot for op in saves if op.save_at >= 0}
    assert len(trailing) == 1 and [op.save_at for op in saves].count(1) == 2
    alloc.free(a)
    turn2 = Request("t", list(range(10)) + [100 + i for i in range(7)] + [5, 6, 7])
    ops = _prefill(alloc, turn2)
    assert ops.init == trailing.pop()
    assert len(alloc.block_ids(turn2)) == 5 and alloc.stats.hit_tokens == 16


def test_a_failed_request_leaves_no_checkpoint_and_every_slot_comes_back():
    alloc = _alloc()
    assert alloc.states is not None
    a, b = Request("a", list(range(10))), Request("b", list(range(20, 31)))
    _prefill(alloc, a)
    _prefill(alloc, b)
    for i in range(7):
        _decode(alloc, b, 200 + i)
    assert alloc.states.num_checkpoints == 2  # each prompt's
    alloc.forget(b)  # failed: its trailing state is suspect, its blocks unnamed
    assert alloc.states.num_checkpoints == 1
    alloc.free(a)
    alloc.reset_prefix_cache()
    assert alloc.states.num_checkpoints == 0 and alloc.states.num_free_slots == 9


def test_checkpoints_go_with_their_blocks_and_least_recently_used_first():
    alloc = _alloc(slots=4, blocks=6)
    assert alloc.states is not None
    a = Request("a", list(range(10)))
    _prefill(alloc, a)
    alloc.free(a)
    assert alloc.states.num_checkpoints == 1
    b = Request("b", list(range(50, 74)))  # every block: a's cached ones are reused
    _prefill(alloc, b)
    assert alloc.find_cached(Request("c", list(range(10)))) == [[]]
    alloc.free(b)
    assert alloc.states.num_checkpoints == 1  # b's own; a's went with its blocks
    # Three prompts, each checkpointed, in four slots: the oldest checkpoint gives way.
    alloc = _alloc(slots=4)
    assert alloc.states is not None
    reqs = [Request(str(i), [i] * 10) for i in range(3)]
    for req in reqs:
        _prefill(alloc, req)
        alloc.free(req)
    assert alloc.states.num_checkpoints == 3
    live = Request("x", [7] * 10)
    _prefill(alloc, live)  # its live slot and its own checkpoint: the oldest is taken
    assert alloc.find_cached(Request("0b", [0] * 10)) == [[]]
    assert len(alloc.find_cached(Request("2b", [2] * 10))[0]) == 2
