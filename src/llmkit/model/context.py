"""ForwardContext: what every layer needs to know about the current step, set once per step."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from llmkit.model.attention.base import AttentionBackend, AttentionMetadata
from llmkit.model.recurrent import StepStates


@dataclass
class ForwardContext:
    positions: torch.Tensor  # [T] int64
    meta: AttentionMetadata  # the step's layout, with the first KV cache group's blocks
    backend: AttentionBackend
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]]  # per KV cache: (k_cache, v_cache)
    # With several KV cache groups (model/kv_layout.py): each group's layout (the first is
    # ``meta``), and each KV cache's group. Empty: every cache reads ``meta``.
    group_metas: tuple[AttentionMetadata, ...] = ()
    cache_groups: tuple[int, ...] = ()
    states: StepStates | None = None  # a hybrid model's linear-attention layers' slots

    def kv(self, cache: int) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
        """KV cache ``cache``'s tensors and the layout (block tables, slots) it is read by."""
        k_cache, v_cache = self.kv_caches[cache]
        if not self.cache_groups:
            return k_cache, v_cache, self.meta
        return k_cache, v_cache, self.group_metas[self.cache_groups[cache]]

    def select(self, reqs: list[int]) -> tuple[ForwardContext, torch.Tensor]:
        """The context of requests ``reqs`` alone, and their rows in this one."""
        meta, rows = self.meta.select(reqs)
        groups = tuple(m.select(reqs)[0] for m in self.group_metas[1:])
        return replace(
            self,
            positions=self.positions[rows],
            meta=meta,
            group_metas=(meta, *groups) if self.group_metas else (),
            states=None if self.states is None else self.states.select(reqs),
        ), rows
