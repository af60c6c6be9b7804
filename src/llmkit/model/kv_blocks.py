"""Rows of cache pools as bytes: what the prompt cache's tiers keep of a KV block (or of a
hybrid's recurrent-state slot).

A row ``i`` of pools ``[p0, p1, ...]`` (each ``[rows, ...]``) is ``p0[i]``'s bytes, then
``p1[i]``'s, one after the other. A KV block of group ``g`` is the row of its layers' keys and
values (:func:`group_caches`); a state slot, the row of every layer's convolution inputs and
delta-rule state. Reads and writes gather all of a step's rows at once, one copy per pool.
"""

from __future__ import annotations

import torch

from llmkit.model.kv_layout import KVLayout

KVCaches = list[tuple[torch.Tensor, torch.Tensor]]


def group_caches(caches: KVCaches, layout: KVLayout, group: int) -> list[torch.Tensor]:
    """The pools a block of ``group`` spans: each of its layers' keys, then values."""
    return [c for i, pair in enumerate(caches) if layout.cache_groups[i] == group for c in pair]


@torch.inference_mode()
def read_rows(pools: list[torch.Tensor], rows: list[int]) -> list[bytes]:
    """Each of ``rows``' bytes across ``pools``."""
    idx = torch.tensor(rows, device=pools[0].device)
    gathered = torch.cat(
        [p.index_select(0, idx).view(len(rows), -1).view(torch.uint8) for p in pools], dim=1
    ).cpu()
    return [row.numpy().tobytes() for row in gathered]


@torch.inference_mode()
def write_rows(pools: list[torch.Tensor], rows: list[int], payloads: list[bytes]) -> None:
    """Fill ``rows`` of ``pools`` with ``payloads`` (as :func:`read_rows` gave them)."""
    width = len(payloads[0])
    staged = bytearray(width * len(payloads))  # one copy in, each payload in its row
    for i, payload in enumerate(payloads):
        staged[i * width : (i + 1) * width] = payload
    data = torch.frombuffer(staged, dtype=torch.uint8).view(len(payloads), width)
    data = data.to(pools[0].device)
    idx = torch.tensor(rows, device=pools[0].device)
    offset = 0
    for pool in pools:
        size = pool[0].numel() * pool.element_size()
        part = data[:, offset : offset + size].view(pool.dtype)  # strided rows, no copy
        pool.index_copy_(0, idx, part.view(len(rows), *pool.shape[1:]))
        offset += size
