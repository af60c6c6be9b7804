"""The packed-weight store: a second load maps what the first packed; a file rewritten in
place, or a broken store, is packed again, never trusted."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from llmkit.model.gguf.packed import PackedStore
from llmkit.model.layers.weights.kq import Packed as KQPacked
from llmkit.model.layers.weights.q8 import Packed as Q8Packed
from llmkit.model.layers.weights.registry import FORMATS


def packs(calls: list[str], name: str, kind: str):
    def make():
        calls.append(name)
        if kind == "Q8_0":
            return Q8Packed(torch.arange(8, dtype=torch.int8), torch.ones(2, dtype=torch.half))
        empty = torch.empty(0, dtype=torch.uint8)
        return KQPacked(kind, torch.arange(6, dtype=torch.uint8), empty, empty, empty, empty, empty)

    return make


def _store(tmp_path: Path) -> PackedStore:
    gguf = tmp_path / "m.gguf"
    if not gguf.exists():
        gguf.write_bytes(b"GGUF" + bytes(100))
    return PackedStore(tmp_path, gguf)


def test_the_second_load_maps_what_the_first_packed(tmp_path: Path) -> None:
    calls: list[str] = []
    first = _store(tmp_path)
    made = [
        first.get("a", FORMATS["Q4_K"], packs(calls, "a", "Q4_K")),
        first.get("h", FORMATS["Q8_0"], packs(calls, "h", "Q8_0")),
    ]
    first.save()
    second = _store(tmp_path)
    mapped = [
        second.get("a", FORMATS["Q4_K"], packs(calls, "a", "Q4_K")),
        second.get("h", FORMATS["Q8_0"], packs(calls, "h", "Q8_0")),
    ]
    assert calls == ["a", "h"]  # packed once
    assert isinstance(mapped[0], KQPacked) and isinstance(mapped[1], Q8Packed)
    assert mapped[0].fmt == "Q4_K"
    for old, new in zip(made, mapped, strict=True):
        tensors = [(x, y) for x, y in zip(old, new, strict=True) if isinstance(x, torch.Tensor)]
        assert all(torch.equal(x, y) for x, y in tensors)


def test_a_file_rewritten_in_place_is_packed_again(tmp_path: Path) -> None:
    calls: list[str] = []
    first = _store(tmp_path)
    first.get("a", FORMATS["Q4_K"], packs(calls, "a", "Q4_K"))
    first.save()
    gguf = tmp_path / "m.gguf"
    stat = gguf.stat()
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same bytes, rewritten
    _store(tmp_path).get("a", FORMATS["Q4_K"], packs(calls, "a", "Q4_K"))
    assert calls == ["a", "a"]


def test_a_broken_store_is_packed_again(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.path is not None
    store.path.write_bytes(b"not a torch file")
    calls: list[str] = []
    again = _store(tmp_path)
    again.get("a", FORMATS["Q4_K"], packs(calls, "a", "Q4_K"))
    again.save()
    assert calls == ["a"]
    assert _store(tmp_path).get("a", FORMATS["Q4_K"], packs(calls, "a", "Q4_K"))
    assert calls == ["a"]
