"""Gemma 3 (text): local layers attending over a sliding window beside global ones, each kind
with its own rotary table; the query scaled by ``query_pre_attn_scalar ** -0.5``; q/k RMSNorm;
sandwich norms; a GeGLU MLP; embeddings scaled by ``sqrt(hidden_size)``; a final logit
soft-cap where the config has one.

Gemma's RMSNorm multiplies by ``1 + w``: the checkpoint's norm weights are shifted by one as
they load, so the model's norms stay the plain ``w * x / rms`` every family runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch
from torch import nn

from llmkit.model.layers.activation import gated_activation
from llmkit.model.models.llama import LayerAttention, LlamaForCausalLM, LlamaMLP
from llmkit.model.parallel import SINGLE, TensorParallel
from llmkit.model.weights import Weight, read

if TYPE_CHECKING:
    from transformers import PretrainedConfig

SLIDING = "sliding_attention"


class Gemma3ForCausalLM(LlamaForCausalLM):
    qk_norm = True
    sandwich_norms = True

    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel = SINGLE) -> None:
        if getattr(cfg, "use_bidirectional_attention", False):
            raise ValueError(
                "Gemma 3 with use_bidirectional_attention (an embedding model) is not a "
                "causal LM; llmkit runs Gemma 3's causal attention only"
            )
        super().__init__(cfg, tp)

    @classmethod
    def layer_attention(cls, cfg: PretrainedConfig, i: int) -> LayerAttention:
        # transformers' Gemma 3 never applies attn_logit_softcapping (Gemma 2's, which it
        # keeps in the config), and llama.cpp's converter refuses a config that sets it:
        # the reference is transformers, so it is not applied here either.
        kind = cfg.layer_types[i]
        window = cfg.sliding_window if kind == SLIDING else None
        return LayerAttention(cfg.query_pre_attn_scalar**-0.5, window=window, rope=kind)

    @classmethod
    def layer_mlp(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        return LlamaMLP(cfg, tp, act=gated_activation(cfg.hidden_activation))

    @classmethod
    def embedding_scale(cls, cfg: PretrainedConfig) -> float | None:
        return float(cfg.hidden_size**0.5)

    def checkpoint_weights(
        self, weights: Iterable[tuple[str, Weight]]
    ) -> Iterable[tuple[str, Weight]]:
        for name, weight in super().checkpoint_weights(weights):
            yield name, (shift_norm(weight) if name.endswith("norm.weight") else weight)


def shift_norm(weight: Weight) -> torch.Tensor:
    """A ``(1 + w)`` RMSNorm's weight as a plain one's, computed in float32 as HF does."""
    return read(weight).float() + 1.0
