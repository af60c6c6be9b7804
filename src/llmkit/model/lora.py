"""LoRA on a loaded model: wraps its projections and fills their slots for each step."""

from __future__ import annotations

import torch
from torch import nn

from llmkit.model.layers.lora import LoRABatch, LoRALinear
from llmkit.model.layers.native import NativeLinear
from llmkit.model.layers.quant import QuantizedLinear
from llmkit.model.lora_adapter import LoRAAdapter, LoRALayout
from llmkit.model.lora_slots import SlotTable


class LoRAModel:
    """The model's LoRALinear layers, ``max_loras`` adapter slots, and the step's mask."""

    def __init__(self, model: object, max_loras: int, max_rank: int) -> None:
        layers = getattr(getattr(model, "model", None), "layers", None)
        # Our (fused) projection under a decoder layer -> the HF module of each of its slices.
        projections: dict[str, tuple[str, ...]] | None = getattr(model, "projections", None)
        if layers is None or projections is None:
            raise ValueError(
                f"LoRA adapters need a Llama-family decoder; {type(model).__name__} is not one"
            )
        self.batch = LoRABatch()
        self.max_loras = max_loras
        self.slot_table = SlotTable(max_loras)
        self._resident: list[LoRAAdapter | None] = [None] * max_loras
        self._linears: list[tuple[int, LoRALinear, tuple[str, ...]]] = []
        shapes: dict[str, tuple[int, int]] = {}
        for i, layer in enumerate(layers):
            for path, targets in projections.items():
                owner_name, attr = path.split(".")
                owner = getattr(layer, owner_name)
                base = getattr(owner, attr, None)
                if base is None:  # a mixture of experts' layer: no dense MLP to adapt
                    continue
                slices = _slice_sizes(base, owner, len(targets))
                wrapped = LoRALinear(base, slices, self.batch, max_loras, max_rank)
                setattr(owner, attr, wrapped)
                self._linears.append((i, wrapped, targets))
                for target, size in zip(targets, slices):
                    shapes[target] = (base.in_features, size)
        self.layout = LoRALayout(len(layers), shapes, max_rank)

    def prepare(self, adapters: list[LoRAAdapter | None], lengths: list[int]) -> None:
        """Make the step's adapters resident and set each token's slot (``lengths``: the
        tokens of each sequence, in batch order)."""
        used = {a.lora_id: a for a in adapters if a is not None}
        if not used:
            self.batch.mask = None
            return
        slots = self.slot_table.assign(list(used))
        for lora_id, adapter in used.items():
            if self._resident[slots[lora_id]] is not adapter:
                self._load(slots[lora_id], adapter)
        per_seq = [-1 if a is None else slots[a.lora_id] for a in adapters]
        token_slots = torch.tensor(per_seq).repeat_interleave(torch.tensor(lengths))
        one_hot = torch.zeros(len(token_slots), self.max_loras + 1)
        one_hot[torch.arange(len(token_slots)), token_slots + 1] = 1.0
        weight = self._linears[0][1].lora_a
        self.batch.mask = one_hot[:, 1:].to(device=weight.device, dtype=weight.dtype)

    def _load(self, slot: int, adapter: LoRAAdapter) -> None:
        for layer, linear, targets in self._linears:
            linear.load(slot, [adapter.weights.get((layer, t)) for t in targets])
        self._resident[slot] = adapter


def _slice_sizes(base: nn.Module, owner: nn.Module, count: int) -> list[int]:
    """The output features of each slice of a fused projection."""
    if not isinstance(base, nn.Linear | QuantizedLinear | NativeLinear):
        raise ValueError(f"LoRA needs plain linear projections, got {type(base).__name__}")
    if count == 3:  # q, k, v
        q, kv = (int(getattr(owner, name)) for name in ("q_size", "kv_size"))
        return [q, kv, kv]
    return [base.out_features // count] * count
