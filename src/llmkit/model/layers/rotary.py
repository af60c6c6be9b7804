"""Rotary position embedding with a precomputed cos/sin table, any HF rope type."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def _inv_freq(hf_config: PretrainedConfig, layer_type: str | None) -> tuple[torch.Tensor, float]:
    params = getattr(hf_config, "rope_parameters", None) or {}
    if layer_type is not None:  # a family with a table per layer type (Gemma's local, global)
        params = params[layer_type]
    rope_type = params.get("rope_type", "default")
    if rope_type == "default":
        head_dim = getattr(hf_config, "head_dim", None) or (
            hf_config.hidden_size // hf_config.num_attention_heads
        )
        # Qwen3.5 rotates the first quarter of each head: the table is that wide.
        dim = int(head_dim * params.get("partial_rotary_factor", 1.0))
        base = params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0))
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), 1.0
    # transformers implements every scaled variant (linear, dynamic, yarn, llama3, longrope);
    # dynamic NTK is taken at the configured length, as vLLM does.
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if rope_type not in ROPE_INIT_FUNCTIONS:
        raise ValueError(f"unsupported rope_type {rope_type!r}")
    extra = {} if layer_type is None else {"layer_type": layer_type}
    inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](hf_config, torch.device("cpu"), **extra)
    return inv_freq.float(), float(scaling)


Rope = tuple[torch.Tensor, torch.Tensor]  # (cos, signed sin), each [T, 1, head_dim]


class RotaryEmbedding(nn.Module):
    """Looks up the step's cos/sin rows once; :func:`apply_rope` uses them in every layer."""

    cos: torch.Tensor  # buffers, [max_positions, head_dim]
    sin: torch.Tensor

    def __init__(
        self, hf_config: PretrainedConfig, max_positions: int, layer_type: str | None = None
    ) -> None:
        """``layer_type``: the key of ``rope_parameters`` to read, where it has one per
        layer type."""
        super().__init__()
        inv_freq, scaling = _inv_freq(hf_config, layer_type)
        positions = torch.arange(max_positions, dtype=torch.float)
        freqs = positions[:, None] * inv_freq[None, :]
        cos, sin = freqs.cos() * scaling, freqs.sin() * scaling
        # Full-width tables, the sine negated on the first half, so that rotating is
        # x * cos + roll(x, half) * sin: four ops instead of chunking and concatenating.
        self.register_buffer("cos", torch.cat((cos, cos), dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat((-sin, sin), dim=-1), persistent=False)

    def forward(self, positions: torch.Tensor) -> Rope:
        return self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)

    def trim(self, max_positions: int) -> None:
        """Keep the rows of the first ``max_positions`` only (the engine's context: a table
        for gpt-oss's 131072 positions is 64 MiB)."""
        if max_positions < self.cos.shape[0]:
            self.cos = self.cos[:max_positions].clone()
            self.sin = self.sin[:max_positions].clone()


def apply_rope(x: torch.Tensor, rope: Rope) -> torch.Tensor:
    """RoPE in the rotate-half layout on ``x`` ``[T, heads, head_dim]``, computed in fp32.

    Bit-identical to HF's ``x * cos + rotate_half(x) * sin``: ``rotate_half`` is the roll
    with the first half negated, and the negation lives in the sine table. A table narrower
    than the heads (a partial rotary factor) rotates their first dimensions only.
    """
    cos, sin = rope
    if cos.shape[-1] < x.shape[-1]:
        rot = cos.shape[-1]
        return torch.cat((apply_rope(x[..., :rot], rope), x[..., rot:]), dim=-1)
    xf = x.float()
    out = xf * cos + xf.roll(x.shape[-1] // 2, dims=-1) * sin
    return out.to(x.dtype)
