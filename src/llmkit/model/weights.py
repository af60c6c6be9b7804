"""What the models' ``load_weights`` share: copy a checkpoint tensor, check that none is missing."""

from __future__ import annotations

from collections.abc import Set

import torch
from torch import nn


def copy_weight(params: dict[str, nn.Parameter], name: str, tensor: torch.Tensor) -> None:
    if name not in params:
        raise ValueError(f"unexpected weight {name!r} in checkpoint")
    params[name].data.copy_(tensor)


def check_all_loaded(
    params: dict[str, nn.Parameter], loaded: set[str], exempt: Set[str] = frozenset()
) -> None:
    missing = set(params) - loaded - exempt
    if missing:
        raise ValueError(f"checkpoint lacks weights: {', '.join(sorted(missing)[:5])}")
