"""The prompt cache's tiers below the KV pool: host memory and disk, keys, bounds, checks."""

from __future__ import annotations

import logging
import os

import pytest

from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request
from llmkit.engine.sched.tiers import DISK, HOST, PromptTiers, Restore

MODEL_A, MODEL_B = b"a" * 32, b"b" * 32
BS = 4


def _key(i: int) -> bytes:
    return bytes([i]) * 32


def test_the_host_tier_keeps_the_most_recently_used_within_its_bytes():
    store = PromptTiers(host_bytes=3 * (100 + 8 * BS))
    tiers = store.for_model(MODEL_A)
    for i in range(3):
        tiers.put(0, _key(i), (i,) * BS, bytes([i]) * 100)
    assert tiers.fetch(0, _key(0), (0,) * BS) is not None  # now the most recent
    tiers.put(0, _key(3), (3,) * BS, b"\3" * 100)
    assert not tiers.contains(0, _key(1))  # the least recently used went
    assert [tiers.contains(0, _key(i)) for i in (0, 2, 3)] == [True] * 3
    assert tiers.nbytes() == (3 * (100 + 8 * BS), 0)


def test_an_entry_serves_only_its_model_group_and_tokens(caplog):
    tiers = PromptTiers(host_bytes=1 << 20).for_model(MODEL_A)
    tiers.put(0, _key(1), (1, 2, 3, 4), b"kv")
    other = tiers.store.for_model(MODEL_B)
    assert not other.contains(0, _key(1)) and other.fetch(0, _key(1), (1, 2, 3, 4)) is None
    assert not tiers.contains(1, _key(1))
    with caplog.at_level(logging.WARNING):
        assert tiers.fetch(0, _key(1), (1, 2, 3, 5)) is None
    assert "other tokens" in caplog.text and not tiers.contains(0, _key(1))


def test_the_disk_tier_survives_a_new_store_and_promotes_to_host(tmp_path):
    store = PromptTiers(host_bytes=1 << 20, disk_dir=tmp_path, disk_bytes=1 << 20)
    store.for_model(MODEL_A).put(0, _key(7), (7,) * BS, b"\7" * 64)
    store.flush()
    again = PromptTiers(host_bytes=1 << 20, disk_dir=tmp_path, disk_bytes=1 << 20)
    tiers = again.for_model(MODEL_A)
    assert tiers.nbytes()[0] == 0 and tiers.nbytes()[1] > 64
    found = tiers.fetch(0, _key(7), (7,) * BS)
    assert found == Restore(_key(7), (7,) * BS, b"\7" * 64, DISK)
    assert tiers.fetch(0, _key(7), (7,) * BS).tier == HOST  # type: ignore[union-attr]


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_disk_entry_is_removed_with_a_log_line_and_never_loaded(tmp_path, caplog, damage):
    store = PromptTiers(host_bytes=0, disk_dir=tmp_path, disk_bytes=1 << 20)
    tiers = store.for_model(MODEL_A)
    tiers.put(0, _key(9), (9,) * BS, b"\x09" * 256)
    store.flush()
    (path,) = tmp_path.glob("*/*.kv")
    data = path.read_bytes()
    damaged = {"truncate": data[:-40], "flip": data[:-50] + b"X" + data[-49:], "empty": b""}
    path.write_bytes(damaged[damage])
    restarted = PromptTiers(host_bytes=0, disk_dir=tmp_path, disk_bytes=1 << 20)
    with caplog.at_level(logging.WARNING):
        assert restarted.for_model(MODEL_A).fetch(0, _key(9), (9,) * BS) is None
    assert "removed the disk entry" in caplog.text and not path.exists()
    assert not restarted.for_model(MODEL_A).contains(0, _key(9))


def test_the_disk_tier_drops_the_least_recently_used_past_its_bytes_and_interrupted_writes(
    tmp_path,
):
    leftover = tmp_path / MODEL_A.hex() / "0-00.kv.123.tmp"
    leftover.parent.mkdir()
    leftover.write_bytes(b"half an entry")
    store = PromptTiers(host_bytes=0, disk_dir=tmp_path, disk_bytes=3 * 1200)
    assert not leftover.exists()
    tiers = store.for_model(MODEL_A)
    for i in range(4):
        tiers.put(0, _key(i), (i,) * BS, bytes([i]) * 1000)
        store.flush()
    assert [tiers.contains(0, _key(i)) for i in range(4)] == [False, True, True, True]
    assert len(list(tmp_path.glob("*/*.kv"))) == 3


def test_clear_forgets_one_model_in_both_tiers(tmp_path):
    store = PromptTiers(host_bytes=1 << 20, disk_dir=tmp_path, disk_bytes=1 << 20)
    a, b = store.for_model(MODEL_A), store.for_model(MODEL_B)
    a.put(0, _key(1), (1,) * BS, b"a")
    b.put(0, _key(1), (1,) * BS, b"b")
    a.clear()
    assert not a.contains(0, _key(1)) and a.nbytes() == (0, 0)
    assert b.contains(0, _key(1)) and not os.path.exists(tmp_path / MODEL_A.hex())


def _request(rid: str, tokens: list[int]) -> Request:
    return Request(rid, tokens)


def test_the_pool_saves_what_it_reuses_and_a_lookup_restores_it():
    tiers = PromptTiers(host_bytes=1 << 20).for_model(MODEL_A)
    alloc = BlockAllocator(num_blocks=4, block_size=BS, tiers=tiers)
    a = _request("a", list(range(1, 11)))  # two full blocks, then two tokens
    assert alloc.allocate(a, 10, alloc.find_cached(a))
    alloc.free(a)
    b = _request("b", list(range(50, 66)))
    assert alloc.allocate(b, 16, alloc.find_cached(b))  # takes every block: a's are saved
    moves = alloc.take_moves()
    assert sorted(key for _, _, key, _ in moves.saves) == sorted(a.block_hashes)
    assert sorted(tokens for *_, tokens in moves.saves) == [(1, 2, 3, 4), (5, 6, 7, 8)]
    for group, _, key, tokens in moves.saves:
        tiers.put(group, key, tokens, b"kv of " + bytes(tokens))
    alloc.free(b)
    again = _request("a2", list(range(1, 11)))
    found = alloc.find_cached(again)
    assert [type(x) for x in found[0]] == [Restore, Restore]
    assert alloc.allocate(again, 2, found)
    loads = alloc.take_moves().loads
    assert [payload for *_, payload in loads] == [b"kv of \1\2\3\4", b"kv of \5\6\7\10"]
    assert [block for _, block, _ in loads] == alloc.block_ids(again)[:2]
    stats = alloc.tier_stats  # of the three lookups, 10 + 16 + 10 tokens, none in the pool
    assert stats.queried[HOST] == 36 and stats.hits[HOST] == 8 and stats.queried[DISK] == 28
    # Named at once: a request with the same prefix now finds them in the pool.
    sibling = _request("a3", list(range(1, 12)))
    assert alloc.find_cached(sibling)[0] == alloc.block_ids(again)[:2]
