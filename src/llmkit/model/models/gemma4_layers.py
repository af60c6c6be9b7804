"""Gemma 4's decoder layer: attention whose head size and KV heads depend on the layer's kind,
values RMS-normed (global layers may take their values from the key projection), the last
layers attending over an earlier layer's keys and values; the MLP, beside it a mixture of
experts where the config has one; the per-layer input's residual; the layer's scalar."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from llmkit.model.attention.base import AttentionSpec
from llmkit.model.context import ForwardContext
from llmkit.model.layers import moe
from llmkit.model.layers.activation import gated_activation
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.layers.parallel_linear import ColumnParallelLinear, RowParallelLinear
from llmkit.model.layers.rotary import Rope, apply_rope
from llmkit.model.models.llama import LayerAttention, LlamaForCausalLM, LlamaMLP
from llmkit.model.parallel import SINGLE

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def kv_layer(cfg: PretrainedConfig, i: int) -> int:
    """The layer whose keys and values layer ``i`` attends over: its own, or for one of the
    last ``num_kv_shared_layers``, those of the last earlier layer of its kind."""
    first_shared = cfg.num_hidden_layers - cfg.num_kv_shared_layers
    if i < first_shared:
        return i
    kinds = cfg.layer_types[:first_shared]
    if cfg.layer_types[i] not in kinds:
        raise ValueError(
            f"Gemma 4 layer {i} ({cfg.layer_types[i]}) shares the keys and values of an "
            "earlier layer of its kind, and none computes them"
        )
    return first_shared - 1 - kinds[::-1].index(cfg.layer_types[i])


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm without a weight (Gemma 4's value norm and router norm), in float32."""
    return torch.rms_norm(x.float(), x.shape[-1:], None, eps).to(x.dtype)


class Gemma4Attention(nn.Module):
    """q (and, for a layer that keeps its own, k and v) from one fused projection, each
    normed; the query scale is one (the q/k norms set the scores' size). A layer that
    shares another's keys and values reads that layer's KV cache and writes none."""

    def __init__(self, cfg: PretrainedConfig, i: int, how: LayerAttention) -> None:
        super().__init__()
        layer_cfg = cfg.per_layer_config[i]  # the head size and KV heads of the layer's kind
        self.layer_idx, self.reads = i, kv_layer(cfg, i)
        self.num_heads, self.head_dim = cfg.num_attention_heads, layer_cfg.head_dim
        self.num_kv_heads = layer_cfg.num_key_value_heads
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale, self.window, self.softcap = how.scale, how.window, how.softcap
        self.rope = how.rope
        own = self.reads == i
        # Global layers with attention_k_eq_v have no v_proj: their values are the keys'
        # projection, value-normed and not rotated.
        self.has_v = own and not (cfg.attention_k_eq_v and how.window is None)
        pieces = [self.q_size] + [self.kv_size] * (int(own) + int(self.has_v))
        bias = bool(cfg.attention_bias)
        self.qkv_proj = ColumnParallelLinear(cfg.hidden_size, [(0, n) for n in pieces], bias)
        self.o_proj = RowParallelLinear(self.q_size, cfg.hidden_size, bias, SINGLE)
        self.eps = cfg.rms_norm_eps
        self.q_norm = RMSNorm(self.head_dim, self.eps)
        self.k_norm = RMSNorm(self.head_dim, self.eps) if own else None

    @property
    def spec(self) -> AttentionSpec:
        return AttentionSpec(self.scale, self.window, self.softcap)

    def forward(self, x: torch.Tensor, ctx: ForwardContext, rope: Rope) -> torch.Tensor:
        qkv = self.qkv_proj(x)
        dim, kv_heads = self.head_dim, self.num_kv_heads
        q = apply_rope(self.q_norm(qkv[:, : self.q_size].view(-1, self.num_heads, dim)), rope)
        k_cache, v_cache, meta = ctx.kv(self.reads)
        if self.k_norm is not None:
            k = qkv[:, self.q_size : self.q_size + self.kv_size].view(-1, kv_heads, dim)
            v = qkv[:, self.q_size + self.kv_size :].view(-1, kv_heads, dim) if self.has_v else k
            k = apply_rope(self.k_norm(k), rope)
            ctx.backend.write_kv(k, _rms(v, self.eps), k_cache, v_cache, meta.slot_mapping)
        out = ctx.backend.forward(q, k_cache, v_cache, meta, self.spec)
        return self.o_proj(out.reshape(-1, self.q_size))


class Gemma4Router(nn.Module):
    """Scores the experts on the RMS-normed rows times a learnt scale and ``hidden ** -0.5``;
    the top ``k`` probabilities (softmax over all experts) renormalized, times each chosen
    expert's own scale. Float, not an ``nn.Linear``: quantizing or packing the model's
    linears leaves the choice of experts as the checkpoint makes it."""

    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        hidden, self.eps = cfg.hidden_size, cfg.rms_norm_eps
        self.root = hidden**-0.5
        self.routing = moe.Routing(cfg.top_k_experts, renormalize=True)
        self.scale = nn.Parameter(torch.empty(hidden))
        self.proj = nn.Parameter(torch.empty(cfg.num_experts, hidden))
        self.per_expert_scale = nn.Parameter(torch.empty(cfg.num_experts))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``x`` ``[T, hidden]`` -> (weights ``[T, k]`` float32, expert ids ``[T, k]``)."""
        scores = nn.functional.linear(_rms(x, self.eps) * self.scale * self.root, self.proj)
        weights, ids = self.routing.route(scores)
        return weights * self.per_expert_scale[ids], ids


class Gemma4DecoderLayer(nn.Module):
    """Gemma's sandwich-normed attention and MLP; with experts, their output (from the
    block's input, routed and normed apart) is added to the MLP's before its last norm;
    then the per-layer input's gated residual, and the whole scaled by ``layer_scalar``."""

    sandwich = True  # (so the fused CPU decode step, which runs none such, passes it by)

    def __init__(self, family: type[LlamaForCausalLM], cfg: PretrainedConfig, i: int) -> None:
        super().__init__()
        self.self_attn = Gemma4Attention(cfg, i, family.layer_attention(cfg, i))
        hidden, eps = cfg.hidden_size, cfg.rms_norm_eps
        act = gated_activation(cfg.hidden_activation)
        shared = self.self_attn.reads != i
        inter = cfg.intermediate_size * (2 if cfg.use_double_wide_mlp and shared else 1)
        self.mlp = LlamaMLP(cfg, SINGLE, inter, act)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.pre_feedforward_layernorm = RMSNorm(hidden, eps)
        self.post_feedforward_layernorm = RMSNorm(hidden, eps)
        self.router = Gemma4Router(cfg) if cfg.enable_moe_block else None
        if self.router is not None:
            experts = cfg.num_experts, hidden, cfg.moe_intermediate_size
            self.experts = moe.Experts(*experts, False, act)
            self.pre_feedforward_layernorm_2 = RMSNorm(hidden, eps)
            self.post_feedforward_layernorm_1 = RMSNorm(hidden, eps)
            self.post_feedforward_layernorm_2 = RMSNorm(hidden, eps)
        per_layer = cfg.hidden_size_per_layer_input or 0
        self.per_layer = per_layer > 0
        if self.per_layer:
            self.per_layer_input_gate = RowParallelLinear(hidden, per_layer, False, SINGLE)
            self.per_layer_projection = RowParallelLinear(per_layer, hidden, False, SINGLE)
            self.post_per_layer_input_norm = RMSNorm(hidden, eps)
            self.act = act
        self.layer_scalar = nn.Parameter(torch.empty(1))

    def forward(
        self,
        x: torch.Tensor,
        ctx: ForwardContext,
        ropes: dict[str, Rope],
        per_layer_input: torch.Tensor | None,
    ) -> torch.Tensor:
        """``per_layer_input``: this layer's ``[T, hidden_size_per_layer_input]`` rows."""
        attn = self.self_attn(self.input_layernorm(x), ctx, ropes[self.self_attn.rope])
        x = x + self.post_attention_layernorm(attn)
        out = self.mlp(self.pre_feedforward_layernorm(x))
        if self.router is not None:
            weights, ids = self.router(x)
            routed = moe.mix(self.experts, self.pre_feedforward_layernorm_2(x), weights, ids)
            out = self.post_feedforward_layernorm_1(out)
            out = out + self.post_feedforward_layernorm_2(routed)
        x = x + self.post_feedforward_layernorm(out)
        if per_layer_input is not None:  # act(gate(x)) * input: the gated activation's form
            gate = self.act.gated(self.per_layer_input_gate(x), per_layer_input)
            x = x + self.post_per_layer_input_norm(self.per_layer_projection(gate))
        return x * self.layer_scalar
