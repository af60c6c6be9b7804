"""Block allocator: reference counts, prefix caching, LRU reuse, every block coming back."""

from __future__ import annotations

import random
import subprocess
import sys

from llmkit.engine.sched.kv_cache import BlockAllocator
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
    assert alloc.find_cached(a) == []
    assert alloc.allocate(a, a.num_tokens)
    b = _req([1, 2, 3, 4, 5, 6, 7, 8, 42, 43], "b")
    cached = alloc.find_cached(b)
    assert cached == alloc.block_ids(a)[:2]
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
    assert len(alloc.find_cached(b)) == 1  # 8 tokens, but the last block is left to compute


def test_salt_and_placeholder_content_key_the_prefix_cache():
    alloc = BlockAllocator(num_blocks=32, block_size=4)
    img_a = [(4, 4, b"image-a")]
    a = Request("a", list(range(13)), placeholders=img_a)
    alloc.allocate(a, a.num_tokens)
    alloc.free(a)

    def hits(**kw):
        return len(alloc.find_cached(Request("x", list(range(13)), **kw)))

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
    assert len(alloc.find_cached(_req([1, 2, 3, 4, 9], "x"))) == 2
    # Reuse takes the never-named block first, then a's tail before its head, so the
    # shared-prefix end of a chain outlives its tail.
    c = _req([7, 7, 7, 7, 7, 7], "c")
    alloc.allocate(c, 6)
    assert len(alloc.find_cached(_req([1, 2, 3, 4, 9], "y"))) == 1
    alloc.free(c)
    d = _req([8] * 8, "d")
    alloc.allocate(d, 8)
    assert alloc.find_cached(_req([1, 2, 3, 4, 9], "z")) == []


def test_forget_unnames_blocks_whose_kv_is_suspect():
    alloc = BlockAllocator(num_blocks=4, block_size=2)
    a = _req([1, 2, 3, 4, 5], "a")
    alloc.allocate(a, 5)
    alloc.forget(a)
    assert alloc.find_cached(_req([1, 2, 3, 4, 5], "b")) == []
    assert alloc.num_free_blocks == 4


def test_reset_prefix_cache_forgets_free_blocks_and_keeps_those_in_use():
    alloc = BlockAllocator(num_blocks=8, block_size=2)
    kept, freed = _req([1, 2, 3, 4, 5], "kept"), _req([6, 7, 8, 9, 1], "freed")
    alloc.allocate(kept, 5)
    alloc.allocate(freed, 5)
    alloc.free(freed)
    assert alloc.reset_prefix_cache() == 2  # freed's two full blocks
    assert alloc.find_cached(_req([6, 7, 8, 9, 1], "x")) == []
    assert len(alloc.find_cached(_req([1, 2, 3, 4, 5], "y"))) == 2  # still held by kept
    alloc.free(kept)
    assert alloc.num_free_blocks == 8


def test_random_mix_returns_every_block():
    rng = random.Random(0)
    alloc = BlockAllocator(num_blocks=64, block_size=4)
    live = []
    for step in range(2000):
        if live and rng.random() < 0.45:
            alloc.free(live.pop(rng.randrange(len(live))))
            continue
        prefix = [rng.randrange(3)] * rng.randrange(0, 12)
        r = _req(prefix + [rng.randrange(100) for _ in range(rng.randrange(1, 20))], str(step))
        cached = alloc.find_cached(r)
        if alloc.allocate(r, r.num_tokens - len(cached) * 4, cached):
            live.append(r)
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
