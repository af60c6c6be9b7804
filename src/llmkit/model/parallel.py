"""TensorParallel: this process's rank among the tensor-parallel ranks, and the collectives.

One size-1 instance serves the unsharded model; the distributed package builds the
process group of a larger one. Everything here is called by every rank, in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.distributed as dist


class Collectives(Protocol):
    """What is used of a ProcessGroupGloo or ProcessGroupNCCL (each call returns a Work)."""

    def allreduce(self, tensors: list[torch.Tensor]) -> Any: ...

    def broadcast(self, tensor: torch.Tensor, root: int) -> Any: ...

    def gather(
        self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any
    ) -> Any: ...


@dataclass(frozen=True)
class TensorParallel:
    rank: int = 0
    size: int = 1
    group: Collectives | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    def __post_init__(self) -> None:
        if self.size > 1 and self.group is None:
            raise ValueError("a tensor-parallel size above 1 needs a process group")

    def shard(self, total: int, what: str) -> tuple[int, int]:
        """This rank's ``(start, length)`` of ``total`` rows split evenly over the ranks."""
        if total % self.size:
            raise ValueError(
                f"{what} ({total}) must divide evenly over tensor_parallel_size={self.size}"
            )
        length = total // self.size
        return self.rank * length, length

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum ``x`` over the ranks, in place."""
        if self.group is not None:
            self.group.allreduce([x]).wait()
        return x

    def gather_last_dim(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x`` side by side on rank 0 (the others get their own ``x`` back)."""
        if self.group is None:
            return x
        opts = dist.GatherOptions()
        opts.rootRank = 0
        x = x.contiguous()
        parts = [[torch.empty_like(x) for _ in range(self.size)]] if self.rank == 0 else []
        self.group.gather(parts, [x], opts).wait()
        return torch.cat(parts[0], dim=-1) if self.rank == 0 else x

    def min(self, value: int) -> int:
        """The smallest of every rank's ``value`` (the ranks must agree on shapes)."""
        if self.group is None:
            return value
        each = torch.zeros(self.size, dtype=torch.int64, device=self.device)
        each[self.rank] = value
        self.group.allreduce([each]).wait()
        return int(each.min().item())


SINGLE = TensorParallel()
