"""LoRALinear: a linear layer plus its tokens' low-rank updates, for every adapter at once."""

from __future__ import annotations

import torch
from torch import nn

from llmkit.model.layers.native import NativeLinear
from llmkit.model.layers.quant import QuantizedLinear


class LoRABatch:
    """The step's adapter of each token, set once per step and read by every LoRALinear.

    ``mask`` is ``[T, max_loras]``: row t is one-hot at token t's slot, zero for a token
    without an adapter; None when no token of the step has one.
    """

    def __init__(self) -> None:
        self.mask: torch.Tensor | None = None


class LoRALinear(nn.Module):
    """``base(x)`` plus ``scale * B_s A_s x`` for each token's slot ``s``, for the whole batch.

    A fused projection (qkv_proj, gate_up_proj) has one slice per HF module (q/k/v,
    gate/up); each slice has its own A and B in every slot, and adds to its columns of the
    output. All slots' A are one ``[in, slices * slots * rank]`` matrix: ``x @ A`` gives every
    token every slot's rank-space vector, the mask keeps the token's own slot's, and each
    slice's B (``[slots * rank, out]``) maps that back. Ranks below ``rank`` are zero-padded.
    The work grows with the number of slots, not of requests or adapters in the step.
    """

    def __init__(
        self,
        base: nn.Linear | QuantizedLinear | NativeLinear,
        slices: list[int],
        batch: LoRABatch,
        slots: int,
        rank: int,
    ) -> None:
        super().__init__()
        self.base = base
        self.batch = batch
        self.slices = slices
        self.num_slots, self.rank = slots, rank
        if isinstance(base, nn.Linear):
            dtype, device = base.weight.dtype, base.weight.device
        else:
            dtype, device = base.dtype, base.device
        self.lora_a = torch.zeros(
            base.in_features, len(slices) * slots * rank, dtype=dtype, device=device
        )
        self.lora_b = [torch.zeros(slots * rank, n, dtype=dtype, device=device) for n in slices]
        self.filled = [False] * slots

    def load(self, slot: int, parts: list[tuple[torch.Tensor, torch.Tensor] | None]) -> None:
        """Put one adapter's (A, scaled B) of each slice (None: not targeted) in ``slot``."""
        r = self.rank
        for s, part in enumerate(parts):
            col = (s * self.num_slots + slot) * r
            self.lora_a[:, col : col + r].zero_()
            self.lora_b[s][slot * r : (slot + 1) * r].zero_()
            if part is not None:
                a, b = part
                n = a.shape[0]
                self.lora_a[:, col : col + n].copy_(a.T)
                self.lora_b[s][slot * r : slot * r + n].copy_(b.T)
        self.filled[slot] = any(part is not None for part in parts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        mask = self.batch.mask
        if mask is None or not any(self.filled):
            return out
        t, slots, r = x.shape[0], self.num_slots, self.rank
        xa = (x @ self.lora_a).view(t, len(self.slices), slots, r) * mask[:, None, :, None]
        # Each slice adds to its own columns in place: no per-slice outputs to concatenate.
        start = 0
        for s, (size, b) in enumerate(zip(self.slices, self.lora_b)):
            out[:, start : start + size].addmm_(xa[:, s].reshape(t, slots * r), b)
            start += size
        return out
