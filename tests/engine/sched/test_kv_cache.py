"""Block allocator: reference counts, prefix caching, LRU reuse, every block coming back."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from llmkit.engine.sched.kv_cache import NO_BLOCK, BlockAllocator
from llmkit.engine.sched.request import Request


def _req(tokens, rid="r"):
    return Request(rid, list(tokens))


def test_allocate_and_free_return_every_block():
    alloc = BlockAllocator(num_blocks=8, block_size=4, enable_prefix_caching=False)
    r = _req(range(10))
    assert alloc.allocate(r, 10)
    assert len(alloc.block_ids(r)) == 3 and alloc.num_free_blocks == 5
    alloc.free(r)
    assert alloc.num_free_blocks == 8


def test_allocation_fails_without_side_effects_when_full():
    alloc = BlockAllocator(num_blocks=2, block_size=4)
    r = _req(range(12))
    assert not alloc.allocate(r, 12)
    assert alloc.num_free_blocks == 2 and alloc.block_ids(r) == []


def test_prefix_blocks_are_shared_and_reference_counted():
    alloc = BlockAllocator(num_blocks=16, block_size=4)
    a = _req([1, 2, 3, 4, 5, 6, 7, 8, 9], "a")
    assert alloc.find_cached(a) == [[]]
    assert alloc.allocate(a, a.num_tokens)
    b = _req([1, 2, 3, 4, 5, 6, 7, 8, 42, 43], "b")
    cached = alloc.find_cached(b)
    assert cached == [alloc.block_ids(a)[:2]]
    assert alloc.allocate(b, b.num_tokens - 8, cached)
    assert alloc.block_ids(b)[:2] == alloc.block_ids(a)[:2]
    used = 3 + 1  # a: 3 blocks; b shares 2 and adds 1
    assert alloc.num_free_blocks == 16 - used
    alloc.free(a)
    assert alloc.num_free_blocks == 16 - 3  # b still holds the shared two and its own
    alloc.free(b)
    assert alloc.num_free_blocks == 16


def test_a_fully_cached_prompt_still_computes_its_last_token():
    alloc = BlockAllocator(num_blocks=8, block_size=4)
    a = _req(range(8), "a")
    alloc.allocate(a, 8)
    alloc.free(a)
    b = _req(range(8), "b")
    assert len(alloc.find_cached(b)[0]) == 1  # 8 tokens, but the last block is left to compute


def test_salt_and_placeholder_content_key_the_prefix_cache():
    alloc = BlockAllocator(num_blocks=32, block_size=4)
    img_a = [(4, 4, b"image-a")]
    a = Request("a", list(range(13)), placeholders=img_a)
    alloc.allocate(a, a.num_tokens)
    alloc.free(a)

    def hits(**kw):
        return len(alloc.find_cached(Request("x", list(range(13)), **kw))[0])

    assert hits(placeholders=img_a) == 3
    # Another image: the block before it is shared, the image's and every later one not.
    assert hits(placeholders=[(4, 4, b"image-b")]) == 1
    assert hits() == 1
    assert hits(placeholders=img_a, cache_salt=b"adapter-1") == 0


def test_freed_cached_blocks_are_found_until_reused_lru():
    alloc = BlockAllocator(num_blocks=4, block_size=2)
    a = _req([1, 2, 3, 4, 5], "a")
    alloc.allocate(a, 5)
    alloc.free(a)
    assert len(alloc.find_cached(_req([1, 2, 3, 4, 9], "x"))[0]) == 2
    # Reuse takes the never-named block first, then a's tail before its head, so the
    # shared-prefix end of a chain outlives its tail.
    c = _req([7, 7, 7, 7, 7, 7], "c")
    alloc.allocate(c, 6)
    assert len(alloc.find_cached(_req([1, 2, 3, 4, 9], "y"))[0]) == 1
    alloc.free(c)
    d = _req([8] * 8, "d")
    alloc.allocate(d, 8)
    assert alloc.find_cached(_req([1, 2, 3, 4, 9], "z")) == [[]]


def test_forget_unnames_blocks_whose_kv_is_suspect():
    alloc = BlockAllocator(num_blocks=4, block_size=2)
    a = _req([1, 2, 3, 4, 5], "a")
    alloc.allocate(a, 5)
    alloc.forget(a)
    assert alloc.find_cached(_req([1, 2, 3, 4, 5], "b")) == [[]]
    assert alloc.num_free_blocks == 4


def test_reset_prefix_cache_forgets_free_blocks_and_keeps_those_in_use():
    alloc = BlockAllocator(num_blocks=8, block_size=2)
    kept, freed = _req([1, 2, 3, 4, 5], "kept"), _req([6, 7, 8, 9, 1], "freed")
    alloc.allocate(kept, 5)
    alloc.allocate(freed, 5)
    alloc.free(freed)
    assert alloc.reset_prefix_cache() == 2  # freed's two full blocks
    assert alloc.find_cached(_req([6, 7, 8, 9, 1], "x")) == [[]]
    assert len(alloc.find_cached(_req([1, 2, 3, 4, 5], "y"))[0]) == 2  # still held by kept
    alloc.free(kept)
    assert alloc.num_free_blocks == 8


@pytest.mark.parametrize("windows", [(None,), (None, 6), (5, None, 9)])
def test_random_mix_returns_every_block(windows):
    rng = random.Random(0)
    alloc = BlockAllocator(num_blocks=64, block_size=4, windows=windows)
    live = []
    for step in range(2000):
        if live and rng.random() < 0.45:
            alloc.free(live.pop(rng.randrange(len(live))))
            continue
        prefix = [rng.randrange(3)] * rng.randrange(0, 12)
        r = _req(prefix + [rng.randrange(100) for _ in range(rng.randrange(1, 20))], str(step))
        cached = alloc.find_cached(r)
        if alloc.allocate(r, r.num_tokens - len(cached[0]) * 4, cached):
            live.append(r)
            r.num_computed_tokens = r.num_tokens
            r.output_token_ids.append(7)
            alloc.allocate(r, 1)  # a decode step: windowed groups pass their early blocks
    for r in live:
        alloc.free(r)
    assert alloc.num_free_blocks == 64
    assert alloc.stats.hit_tokens > 0


def test_scheduler_allocator_and_request_import_no_torch():
    code = (
        "import sys; from llmkit.engine.sched import scheduler, kv_cache, request;"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _computed_in_chunks(alloc, request, chunk):
    """Allocate ``request``'s tokens ``chunk`` at a time, as chunked prefill does; returns
    every block each group ever held, by position."""
    seen = [{} for _ in alloc.windows]
    while request.num_computed_tokens < request.num_tokens:
        n = min(chunk, request.num_tokens - request.num_computed_tokens)
        assert alloc.allocate(request, n)
        groups = [alloc.block_ids(request), *alloc.group_block_ids(request)]
        for blocks, group in zip(groups, seen):
            group.update((i, b) for i, b in enumerate(blocks) if b != NO_BLOCK)
        request.num_computed_tokens += n
    return [[group[i] for i in sorted(group)] for group in seen]


def test_a_windowed_group_keeps_only_the_blocks_its_window_reaches():
    alloc = BlockAllocator(num_blocks=64, block_size=4, windows=(None, 6))
    r = _req(range(40))
    held = []
    while r.num_computed_tokens < r.num_tokens:
        assert alloc.allocate(r, 4)
        full, windowed = alloc.block_ids(r), alloc.group_block_ids(r)[0]
        assert len(full) == len(windowed) == r.num_computed_tokens // 4 + 1
        kept = [i for i, b in enumerate(windowed) if b != NO_BLOCK]
        # The chunk's first query (position start) reads keys from start - 5 on.
        assert kept[0] == max(0, r.num_computed_tokens - 5) // 4
        held.append(len(kept))
        r.num_computed_tokens += 4
    assert max(held) == 3  # not the ten blocks of the whole context
    assert alloc.num_free_blocks == 64 - 10 - 3
    alloc.free(r)
    assert alloc.num_free_blocks == 64


def test_a_prefix_hit_needs_the_window_before_it_in_every_windowed_group():
    alloc = BlockAllocator(num_blocks=11, block_size=4, windows=(None, 4))
    a = _req(range(16), "a")
    full, windowed = _computed_in_chunks(alloc, a, 4)
    assert alloc.group_block_ids(a)[0][:2] == [NO_BLOCK, NO_BLOCK]  # passed: free, named
    alloc.free(a)
    # Three never-used blocks go first, then the oldest passed one: a's windowed block 0.
    filler = _req([99] * 8, "filler")
    assert alloc.allocate(filler, 8)
    # Resuming after two blocks reads keys 5..7: windowed block 1 is still cached.
    b = _req([*range(8), 50, 51, 52, 53, 54], "b")
    assert alloc.find_cached(b) == [full[:2], [NO_BLOCK, windowed[1]]]
    # Resuming after one reads keys 1..3, of windowed block 0, now gone: no hit at all,
    # though the full group still has block 0.
    c = _req([*range(4), 60, 61, 62, 63, 64], "c")
    assert alloc.find_cached(c) == [[], []]
    hit = alloc.find_cached(b)
    assert alloc.allocate(b, b.num_tokens - 8, hit)
    assert alloc.block_ids(b)[:2] == full[:2]
    for r in (b, filler):
        alloc.free(r)
    assert alloc.num_free_blocks == 11
