"""A KV cache group's blocks as bytes: what the prompt cache's tiers keep of a block.

A block of group ``g`` is, for each of the group's layers in order, its keys then its values
(``[block_size, heads, dim]`` each, in the cache's dtype), one after the other. Reads and
writes gather all of a step's blocks at once, one copy per cache.
"""

from __future__ import annotations

import torch

from llmkit.model.kv_layout import KVLayout

KVCaches = list[tuple[torch.Tensor, torch.Tensor]]


def _group_caches(caches: KVCaches, layout: KVLayout, group: int) -> list[torch.Tensor]:
    return [c for i, pair in enumerate(caches) if layout.cache_groups[i] == group for c in pair]


def block_nbytes(caches: KVCaches, layout: KVLayout, group: int) -> int:
    return sum(c[0].numel() * c.element_size() for c in _group_caches(caches, layout, group))


@torch.inference_mode()
def read_blocks(caches: KVCaches, layout: KVLayout, group: int, blocks: list[int]) -> list[bytes]:
    """Each of ``blocks``' bytes in ``group``."""
    idx = torch.tensor(blocks, device=caches[0][0].device)
    rows = torch.cat(
        [
            c.index_select(0, idx).view(len(blocks), -1).view(torch.uint8)
            for c in _group_caches(caches, layout, group)
        ],
        dim=1,
    ).cpu()
    return [row.numpy().tobytes() for row in rows]


@torch.inference_mode()
def write_blocks(
    caches: KVCaches, layout: KVLayout, group: int, blocks: list[int], payloads: list[bytes]
) -> None:
    """Fill ``blocks`` of ``group`` with ``payloads`` (as :func:`read_blocks` gave them)."""
    targets = _group_caches(caches, layout, group)
    width = len(payloads[0])
    staged = bytearray(width * len(payloads))  # one copy in, each payload in its row
    for i, payload in enumerate(payloads):
        staged[i * width : (i + 1) * width] = payload
    rows = torch.frombuffer(staged, dtype=torch.uint8).view(len(payloads), width)
    rows = rows.to(targets[0].device)
    idx = torch.tensor(blocks, device=targets[0].device)
    offset = 0
    for cache in targets:
        size = cache[0].numel() * cache.element_size()
        part = rows[:, offset : offset + size].view(cache.dtype)  # rows strided, no copy
        cache.index_copy_(0, idx, part.view(len(blocks), *cache.shape[1:]))
        offset += size
