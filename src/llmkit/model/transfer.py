"""Host <-> device copies that never make the host wait for the device.

On CUDA a copy from pageable host memory waits for the kernels queued before it, and
allocating pinned memory for each copy does too once the caching host allocator's blocks
are all held by a step still in flight (it falls back to ``cudaHostAlloc``). So a step's
copies go through pinned slots reused round-robin, one slot a step (``Staging``): the
host writes values into the step's slot and queues the copy behind the work already on
the stream. On CPU they are plain tensors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

_SLOTS = 4  # a slot is reused 4 steps later; at most one step is ever in flight
_ALIGN = 64


class Staging:
    """The pinned slots of one runner's steps."""

    def __init__(self, device: torch.device, slot_bytes: int = 1 << 20):
        self.device = device
        self.pinned = device.type == "cuda"
        self._slots = (
            [torch.empty(slot_bytes, dtype=torch.uint8, pin_memory=True) for _ in range(_SLOTS)]
            if self.pinned
            else []
        )
        self._done: list[torch.cuda.Event | None] = [None] * len(self._slots)
        self._slot = self._offset = 0

    def next_step(self) -> None:
        """Start a step: its copies take the next slot, once the copies of the step that
        last used it are done (long since, unless the host ran ahead by 4 steps). A host
        copy made in a step must be read before the step 4 later starts."""
        if not self.pinned:
            return
        done = torch.cuda.Event()
        done.record()
        self._done[self._slot] = done
        self._slot = (self._slot + 1) % _SLOTS
        self._offset = 0
        previous = self._done[self._slot]
        if previous is not None:
            previous.synchronize()

    def to_device(self, values: Sequence[Any], dtype: torch.dtype) -> torch.Tensor:
        """``values`` as a tensor on the device, queued behind the work on its stream."""
        if not self.pinned:
            return torch.tensor(values, dtype=dtype, device=self.device)
        host = torch.tensor(values, dtype=dtype)
        staged = self._take(host.shape, dtype)
        staged.copy_(host)
        return staged.to(self.device, non_blocking=True)

    def to_host(self, tensor: torch.Tensor) -> torch.Tensor:
        """A host tensor that holds ``tensor`` once the stream reaches this point (an event
        recorded after it says when); ``tensor`` itself on CPU."""
        if not self.pinned:
            return tensor
        return self._take(tensor.shape, tensor.dtype).copy_(tensor, non_blocking=True)

    def _take(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        nbytes = math.prod(shape) * dtype.itemsize
        start = -(-self._offset // _ALIGN) * _ALIGN
        slot = self._slots[self._slot]
        if start + nbytes > len(slot):
            # A bigger slot from here on; what this step staged in the old one stays valid
            # (its views hold it, and the caching allocator keeps it until its copies end).
            slot = torch.empty(max(2 * len(slot), nbytes), dtype=torch.uint8, pin_memory=True)
            self._slots[self._slot] = slot
            start = 0
        self._offset = start + nbytes
        return slot[start : start + nbytes].view(dtype).view(shape)


def scatter_in_flight(
    ids: torch.Tensor,
    rows: list[tuple[int, int]],
    sampled: torch.Tensor | None,
    staging: Staging,
) -> None:
    """Write into ``ids`` the input tokens a previous step sampled and the host has not seen:
    ``rows`` pairs a flat index of ``ids`` with a row of ``sampled``, both on the device."""
    if not rows:
        return
    assert sampled is not None, "a step reads tokens in flight but was given none"
    dst = staging.to_device([i for i, _ in rows], torch.int64)
    src = staging.to_device([j for _, j in rows], torch.int64)
    ids[dst] = sampled[src]


def take_rows(tensor: torch.Tensor, rows: list[int], staging: Staging) -> torch.Tensor:
    """``tensor[rows]`` without a host wait; ``tensor`` itself when ``rows`` are all of its
    rows in order (every row of a decode step samples)."""
    if len(rows) == len(tensor) and (not rows or rows[-1] == len(rows) - 1):
        return tensor  # rows are ascending and distinct, so they are 0..n-1
    return tensor[staging.to_device(rows, torch.int64)]
