"""Gated activations over a fused gate/up projection (gate rows first, then up rows)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class GatedActivation(nn.Module):
    """``[..., 2d]`` (gate, up) -> ``[..., d]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return self.gated(gate, up)

    def gated(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class SiluAndMul(GatedActivation):
    """``silu(gate) * up``: the SwiGLU of Llama-family MLPs."""

    def gated(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.silu(gate) * up


class GeluTanhAndMul(GatedActivation):
    """``gelu_tanh(gate) * up``: Gemma's GeGLU (HF's ``gelu_pytorch_tanh``)."""

    def gated(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.gelu(gate, approximate="tanh") * up


class ClampedSwiGLU(GatedActivation):
    """gpt-oss's experts: both halves clamped to ``limit`` (the gate from above only), then
    ``(up + 1) * gate * sigmoid(alpha * gate)``."""

    def __init__(self, alpha: float, limit: float) -> None:
        super().__init__()
        self.alpha, self.limit = alpha, limit

    def gated(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        gate = gate.clamp(max=self.limit)
        up = up.clamp(-self.limit, self.limit)
        return (up + 1) * (gate * torch.sigmoid(gate * self.alpha))


def gated_activation(name: str) -> GatedActivation:
    """The gated activation of an HF ``hidden_act``/``hidden_activation`` name."""
    if name == "silu":
        return SiluAndMul()
    if name in ("gelu_pytorch_tanh", "gelu_tanh"):
        return GeluTanhAndMul()
    raise ValueError(f"unsupported MLP activation {name!r}")
