"""What the models' ``load_weights`` share: copy a checkpoint tensor, check that none is missing.

A checkpoint weight is a tensor or a safetensors slice, which reads from disk only the
part that is indexed: a tensor-parallel rank reads its own rows or columns, never all.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Set
from typing import Any

import torch
from torch import nn

# A torch.Tensor, or a safetensors slice (read lazily on indexing).
Weight = Any


class FromCheckpoint:
    """A layer whose parameters always come from a checkpoint: it skips torch's random
    initialization (first in the bases), which for a 135M model takes ~0.5 s and touches
    every page of weights that a GGUF's quantized layers then replace unused."""

    def reset_parameters(self) -> None:
        pass


def read(weight: Weight, dim: int = 0, start: int = 0, length: int | None = None) -> torch.Tensor:
    """``weight``, or its ``length`` entries from ``start`` along ``dim``, as a tensor."""
    if isinstance(weight, torch.Tensor):
        return weight if length is None else weight.narrow(dim, start, length)
    if length is None:
        return weight[:]
    index = (slice(None),) * dim + (slice(start, start + length),)
    return weight[index]


def set_weight_loader(
    param: torch.Tensor, loader: Callable[[nn.Parameter, Weight, int | None], None]
) -> None:
    """Have ``copy_weight`` load ``param`` through ``loader``, a method of its layer, held
    weakly: a parameter holding its layer would put every layer in a reference cycle, which
    only a garbage collection frees (the model's memory, after its engine shut down)."""
    param.weight_loader = weakref.WeakMethod(loader)  # type: ignore[attr-defined]


def copy_weight(
    params: dict[str, nn.Parameter], name: str, weight: Weight, part: int | None = None
) -> None:
    """Load ``weight`` into ``params[name]``, through the parameter's ``weight_loader``
    (a sharded or fused layer's: ``part`` is the fused piece) if it has one."""
    if name not in params:
        raise ValueError(f"unexpected weight {name!r} in checkpoint")
    param = params[name]
    loader = getattr(param, "weight_loader", None)
    if loader is not None:
        loader()(param, weight, part)
    else:
        param.data.copy_(read(weight))


def check_all_loaded(
    params: dict[str, nn.Parameter], loaded: set[str], exempt: Set[str] = frozenset()
) -> None:
    missing = set(params) - loaded - exempt
    if missing:
        raise ValueError(f"checkpoint lacks weights: {', '.join(sorted(missing)[:5])}")


def stacked_pieces(projections: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, int]]:
    """A model class's ``projections``: HF parameter name piece -> (our fused parameter, its
    shard), for the stacked ones."""
    return {
        piece: (path.rpartition(".")[2], shard)
        for path, pieces in projections.items()
        if len(pieces) > 1
        for shard, piece in enumerate(pieces)
    }
