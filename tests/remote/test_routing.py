"""Replica routing and merged stats, without Ray: pure functions of loads and snapshots."""

from __future__ import annotations

from llmkit.remote.routing import Router
from llmkit.types import EngineStats


def test_a_shared_prefix_keeps_its_replica_until_it_is_much_busier():
    router = Router(prefix_tokens=4, slack=2)
    prefix = [5, 6, 7, 8]
    first = router.choose([*prefix, 1], {0: 0, 1: 0, 2: 0})
    loads = {0: 0, 1: 0, 2: 0}
    for suffix in range(6):
        loads[first] = min(suffix, 2)
        assert router.choose([*prefix, 100 + suffix], loads) == first
    loads[first] = 3  # more than the least loaded plus the slack
    assert router.choose([*prefix, 9], loads) != first


def test_without_a_long_prefix_the_least_loaded_wins_and_ties_take_turns():
    router = Router(prefix_tokens=4, slack=2)
    assert router.choose([1, 2], {0: 3, 1: 1, 2: 2}) == 1
    assert {router.choose([1, 2], {0: 0, 1: 0}) for _ in range(4)} == {0, 1}
    assert router.choose(list(range(10)), {1: 0}) == 1  # only replica 1 is alive


def _stats(running: int, prompt: int, hit_rate: float, limit: int | None) -> EngineStats:
    return EngineStats(
        num_running=running,
        num_waiting=1,
        kv_blocks_total=10,
        kv_blocks_free=4,
        prefix_cache_hit_rate=hit_rate,
        generated_tokens=7,
        prompt_tokens=prompt,
        steps=3,
        num_preemptions=0,
        max_queued_requests=limit,
        queue_wait_buckets=(1, 2),
    )


def test_merged_stats_add_up_and_weigh_the_hit_rate_by_prompt_tokens():
    merged = EngineStats.merge([_stats(2, 300, 0.5, 8), _stats(1, 100, 0.1, 8)])
    assert (merged.num_running, merged.num_waiting, merged.prompt_tokens) == (3, 2, 400)
    assert (merged.kv_blocks_total, merged.kv_blocks_free) == (20, 8)
    assert abs(merged.prefix_cache_hit_rate - (0.5 * 300 + 0.1 * 100) / 400) < 1e-12
    assert merged.max_queued_requests == 16 and merged.queue_wait_buckets == (2, 4)
    assert (
        EngineStats.merge([_stats(1, 0, 0.0, 8), _stats(1, 0, 0.0, None)]).max_queued_requests
        is None
    )
