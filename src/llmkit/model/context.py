"""ForwardContext: what every layer needs to know about the current step, set once per step."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmkit.model.attention.base import AttentionBackend, AttentionMetadata


@dataclass
class ForwardContext:
    positions: torch.Tensor  # [T] int64
    meta: AttentionMetadata
    backend: AttentionBackend
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (k_cache, v_cache)
