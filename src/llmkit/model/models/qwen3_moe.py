"""Qwen3-MoE: Qwen3's attention (q/k RMSNorm) with a mixture of experts in place of the MLP
(softmax router, top-k, optionally renormalized), on every ``decoder_sparse_step``-th layer
but the ``mlp_only_layers``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from llmkit.model.layers.activation import gated_activation
from llmkit.model.layers.moe import Routing, SparseMoE
from llmkit.model.models.llama import LlamaForCausalLM, LlamaMLP
from llmkit.model.parallel import TensorParallel

if TYPE_CHECKING:
    from transformers import PretrainedConfig


class Qwen3MoeForCausalLM(LlamaForCausalLM):
    qk_norm = True
    supports_tensor_parallel = False  # experts are not sharded over ranks

    @classmethod
    def layer_mlp(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        sparse = (
            i not in (cfg.mlp_only_layers or [])
            and cfg.num_experts > 0
            and (i + 1) % cfg.decoder_sparse_step == 0
        )
        if not sparse:
            return LlamaMLP(cfg, tp)
        routing = Routing(cfg.num_experts_per_tok, renormalize=bool(cfg.norm_topk_prob))
        act = gated_activation(cfg.hidden_act)
        return SparseMoE(cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts, routing, act)
