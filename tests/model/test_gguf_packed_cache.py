"""The packed-weight cache: a second load maps what the first packed; a broken cache is
packed again, never trusted."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from llmkit.model.gguf.packed_cache import PackedCache
from llmkit.model.layers import q8, w4a8


def packs(calls: list[str], name: str, kind: str):
    def make():
        calls.append(name)
        if kind == "q8":
            return q8.Packed(torch.arange(8, dtype=torch.int8), torch.ones(2, dtype=torch.half))
        return w4a8.Packed(
            torch.arange(6, dtype=torch.uint8), torch.ones(3).half(), torch.zeros(3).half()
        )

    return make


def test_the_second_load_maps_what_the_first_packed(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(100))
    calls: list[str] = []
    first = PackedCache(gguf, tmp_path / "cache")
    made = first.get("a", packs(calls, "a", "w4a8")), first.get("h", packs(calls, "h", "q8"))
    first.save()
    second = PackedCache(gguf, tmp_path / "cache")
    mapped = second.get("a", packs(calls, "a", "w4a8")), second.get("h", packs(calls, "h", "q8"))
    assert calls == ["a", "h"]  # packed once
    assert isinstance(mapped[0], w4a8.Packed) and isinstance(mapped[1], q8.Packed)
    for old, new in zip(made, mapped, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(old, new, strict=True))


def test_a_file_rewritten_in_place_is_packed_again(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(100))
    calls: list[str] = []
    first = PackedCache(gguf, tmp_path / "cache")
    first.get("a", packs(calls, "a", "w4a8"))
    first.save()
    stat = gguf.stat()
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same bytes, rewritten
    PackedCache(gguf, tmp_path / "cache").get("a", packs(calls, "a", "w4a8"))
    assert calls == ["a", "a"]


def test_a_broken_cache_is_packed_again(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(100))
    cache = PackedCache(gguf, tmp_path / "cache")
    cache.path.parent.mkdir(parents=True)
    cache.path.write_bytes(b"not a torch file")
    calls: list[str] = []
    again = PackedCache(gguf, tmp_path / "cache")
    again.get("a", packs(calls, "a", "w4a8"))
    again.save()
    assert calls == ["a"]
    assert PackedCache(gguf, tmp_path / "cache").get("a", packs(calls, "a", "w4a8"))
    assert calls == ["a"]
