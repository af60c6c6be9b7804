"""Host <-> device copies that never make the host wait for the device.

On CUDA a copy from pageable host memory waits for every kernel queued before it, so one
``torch.tensor(values, device="cuda")`` in a step serializes the host with the GPU. These
go through pinned memory and the stream's order instead: the host queues the copy and moves
on. On CPU they are plain tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def to_device(values: Sequence[Any], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``values`` as a tensor on ``device``, queued behind the work already on its stream."""
    if device.type != "cuda":
        return torch.tensor(values, dtype=dtype, device=device)
    return torch.tensor(values, dtype=dtype, pin_memory=True).to(device, non_blocking=True)


def start_to_host(tensor: torch.Tensor) -> torch.Tensor:
    """A host tensor that will hold ``tensor`` once the device's stream reaches this point
    (``torch.cuda.Event`` recorded after it says when); ``tensor`` itself on CPU."""
    if tensor.device.type != "cuda":
        return tensor
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    return host.copy_(tensor, non_blocking=True)


def scatter_in_flight(
    ids: torch.Tensor, rows: list[tuple[int, int]], sampled: torch.Tensor | None
) -> None:
    """Write into ``ids`` the input tokens a previous step sampled and the host has not seen:
    ``rows`` pairs a flat index of ``ids`` with a row of ``sampled``, both on the device."""
    if not rows:
        return
    assert sampled is not None, "a step reads tokens in flight but was given none"
    dst = to_device([i for i, _ in rows], torch.int64, ids.device)
    src = to_device([j for _, j in rows], torch.int64, ids.device)
    ids[dst] = sampled[src]


def take_rows(tensor: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``tensor[rows]`` without a host wait; ``tensor`` itself when ``rows`` are all of its
    rows in order (every row of a decode step samples)."""
    if len(rows) == len(tensor) and (not rows or rows[-1] == len(rows) - 1):
        return tensor  # rows are ascending and distinct, so they are 0..n-1
    return tensor[to_device(rows, torch.int64, tensor.device)]
