"""ForwardContext: what every layer needs to know about the current step, set once per step."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from llmkit.model.attention.base import AttentionBackend, AttentionMetadata
from llmkit.model.recurrent import StepStates


@dataclass
class ForwardContext:
    positions: torch.Tensor  # [T] int64
    # The step's layout once per KV cache group (model/kv_layout.py): the same queries and
    # lengths, each group's slots and block tables.
    metas: tuple[AttentionMetadata, ...]
    backend: AttentionBackend
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]]  # per KV cache: (k_cache, v_cache)
    cache_groups: tuple[int, ...]  # per KV cache: its group
    # Every group's slots and block tables one after the other, where the runner staged them
    # so (None: a selection's, stacked when asked for).
    stacked: tuple[torch.Tensor, torch.Tensor] | None = None
    states: StepStates | None = None  # a hybrid model's linear-attention layers' slots

    @property
    def meta(self) -> AttentionMetadata:
        """The step's layout, with the first group's blocks."""
        return self.metas[0]

    def kv(self, cache: int) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
        """KV cache ``cache``'s tensors and the layout (block tables, slots) it is read by."""
        k_cache, v_cache = self.kv_caches[cache]
        return k_cache, v_cache, self.metas[self.cache_groups[cache]]

    def group_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every group's slot mapping ``[groups * T]`` and block tables ``[groups * B, W]``."""
        if self.stacked is not None:
            return self.stacked
        if len(self.metas) == 1:
            return self.meta.slot_mapping, self.meta.block_tables
        slots = torch.cat([m.slot_mapping for m in self.metas])
        return slots, torch.cat([m.block_tables for m in self.metas])

    def select(self, reqs: list[int]) -> tuple[ForwardContext, torch.Tensor]:
        """The context of requests ``reqs`` alone, and their rows in this one."""
        metas = [m.select(reqs) for m in self.metas]
        rows = metas[0][1]
        return replace(
            self,
            positions=self.positions[rows],
            metas=tuple(m for m, _ in metas),
            stacked=None,
            states=None if self.states is None else self.states.select(reqs),
        ), rows
