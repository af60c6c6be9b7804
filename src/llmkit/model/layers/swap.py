"""Swap a model's linear layers for other implementations after loading."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn


def replace_linears(model: nn.Module, make: Callable[[nn.Linear], nn.Module]) -> int:
    """Replace each ``nn.Linear`` of ``model`` (inside wrappers too) but the lm_head, whose
    weight may be the embeddings', by ``make(layer)``; returns how many were replaced."""
    head = getattr(model, "lm_head", None)
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear) and child is not head and name != "lm_head"
    ]
    for parent, name, child in targets:
        setattr(parent, name, make(child))
    return len(targets)
