"""Qwen3.5 and Qwen3.6 (text), dense and mixture of experts: hybrids of Gated DeltaNet layers
(linear attention with a recurrent state, :mod:`llmkit.model.layers.gated_delta_net`) and,
every ``full_attention_interval``-th layer, gated full attention.

The full-attention layers are Qwen3's (q/k RMSNorm) with two changes: the query projection
also gives a gate per output, whose sigmoid scales the attention's output, and RoPE turns
only the first ``partial_rotary_factor`` of each head. Only they keep a KV cache; the
linear-attention layers keep a state slot per sequence. The MoE variant routes each token
to ``num_experts_per_tok`` experts (softmax, renormalized) beside a shared expert behind a
sigmoid gate. Every RMSNorm but the linear attention's gated one multiplies by ``1 + w``:
those weights are shifted by one as they load, as Gemma's are.

The checkpoints' multi-token-prediction layers (``mtp.*``) are not used.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from llmkit.model.context import ForwardContext
from llmkit.model.layers.activation import gated_activation
from llmkit.model.layers.gated_delta_net import GatedDeltaNet
from llmkit.model.layers.moe import Routing, SparseMoE, unfuse_experts
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.layers.parallel_linear import QKVParallelLinear
from llmkit.model.layers.rotary import Rope, apply_rope
from llmkit.model.models.gemma3 import shift_norm
from llmkit.model.models.llama import (
    LayerAttention,
    LlamaAttention,
    LlamaForCausalLM,
    LlamaMLP,
    head_dim,
)
from llmkit.model.parallel import SINGLE, TensorParallel
from llmkit.model.weights import Weight, read

if TYPE_CHECKING:
    from transformers import PretrainedConfig

LINEAR = "linear_attention"
# The norm that is a plain ``w * x / rms`` (times the gate): not shifted.
_PLAIN_NORM = "linear_attn.norm.weight"


class GatedAttention(LlamaAttention):
    """Qwen3's attention whose query projection interleaves a gate with each head's query."""

    gated = True  # (the fused decode step's flag)

    def __init__(self, cfg: PretrainedConfig, cache: int, how: LayerAttention) -> None:
        super().__init__(cfg, cache, bool(cfg.attention_bias), True, SINGLE, how)
        heads, dim = cfg.num_attention_heads, self.head_dim
        # Twice the query heads: each head's query rows, then its gate's.
        self.qkv_proj = QKVParallelLinear(
            cfg.hidden_size,
            2 * heads,
            cfg.num_key_value_heads,
            dim,
            bool(cfg.attention_bias),
            SINGLE,
        )

    def forward(self, x: torch.Tensor, ctx: ForwardContext, rope: Rope) -> torch.Tensor:
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        assert self.q_norm is not None and self.k_norm is not None
        qg, k, v = self.qkv_proj(x).split([2 * self.q_size, self.kv_size, self.kv_size], dim=-1)
        qg = qg.view(-1, heads, 2 * dim)
        q = apply_rope(self.q_norm(qg[..., :dim].contiguous()), rope)
        k = apply_rope(self.k_norm(k.reshape(-1, kv_heads, dim)), rope)
        k_cache, v_cache, meta = ctx.kv(self.layer_idx)
        ctx.backend.write_kv(k, v.reshape(-1, kv_heads, dim), k_cache, v_cache, meta.slot_mapping)
        out = ctx.backend.forward(q, k_cache, v_cache, meta, self.spec)
        gate = torch.sigmoid(qg[..., dim:].float()).to(out.dtype)
        return self.o_proj((out * gate).reshape(-1, self.q_size))


class Qwen3_5DecoderLayer(nn.Module):
    """Norm, token mixer (linear or full attention), residual; norm, MLP, residual."""

    def __init__(
        self, family: type[Qwen3_5ForCausalLM], cfg: PretrainedConfig, i: int, tp: TensorParallel
    ) -> None:
        super().__init__()
        kinds = cfg.layer_types
        earlier = kinds[:i]
        if kinds[i] == LINEAR:  # each kind numbers its caches (states, KV) in layer order
            self.linear_attn = GatedDeltaNet(cfg, earlier.count(LINEAR))
        else:
            how = family.layer_attention(cfg, i)
            self.self_attn = GatedAttention(cfg, len(earlier) - earlier.count(LINEAR), how)
        self.mlp = family.layer_mlp(cfg, i, tp)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, ctx: ForwardContext, ropes: dict[str, Rope]) -> torch.Tensor:
        h = self.input_layernorm(x)
        if hasattr(self, "linear_attn"):
            x = x + self.linear_attn(h, ctx)
        else:
            x = x + self.self_attn(h, ctx, ropes[self.self_attn.rope])
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen3_5ForCausalLM(LlamaForCausalLM):
    qk_norm = True
    supports_tensor_parallel = False  # linear attention's heads are not sharded over ranks
    projections: ClassVar[dict[str, tuple[str, ...]]] = {
        **LlamaForCausalLM.projections,
        "linear_attn.in_proj": ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"),
        "linear_attn.out_proj": ("out_proj",),
        # (Its pieces are named after mlp.gate_up_proj's: checkpoints stack them by that.)
        "mlp.shared_expert.gate_up_proj": ("shared_expert.gate_proj", "shared_expert.up_proj"),
        "mlp.shared_expert.down_proj": ("shared_expert.down_proj",),
    }
    # A GGUF file's names (model/gguf/weights.py reads its ssm_dt.bias as dt.bias).
    renames: ClassVar[dict[str, str]] = {"linear_attn.dt.bias": "linear_attn.dt_bias"}

    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel = SINGLE) -> None:
        super().__init__(cfg, tp)
        mixers = (getattr(layer, "linear_attn", None) for layer in self.model.layers)
        self.recurrent_state_shapes = [m.state_shape for m in mixers if m is not None]

    @classmethod
    def layer_attention(cls, cfg: PretrainedConfig, i: int) -> LayerAttention:
        return LayerAttention(head_dim(cfg) ** -0.5)

    @classmethod
    def decoder_layer(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        return Qwen3_5DecoderLayer(cls, cfg, i, tp)

    def checkpoint_weights(
        self, weights: Iterable[tuple[str, Weight]]
    ) -> Iterable[tuple[str, Weight]]:
        """``1 + w`` norms shifted; the convolution's ``[C, 1, K]`` weight as ``[C, K]``; a
        GGUF file's ``ssm_a`` (``-exp(A_log)``) back to ``A_log``; the multi-token-prediction
        layers dropped; fused experts split (the MoE's)."""
        for name, weight in super().checkpoint_weights(weights):
            if name.startswith(("mtp.", "model.mtp.")):
                continue
            if name.endswith("norm.weight") and not name.endswith(_PLAIN_NORM):
                yield name, shift_norm(weight)
            elif name.endswith("conv1d.weight"):
                tensor = read(weight)
                yield name, tensor.reshape(tensor.shape[0], -1)
            elif name.endswith(".ssm_a"):
                yield name.removesuffix("ssm_a") + "A_log", torch.log(-read(weight).float())
            else:
                yield from unfuse_experts(name, weight)


class Qwen3_5MoeForCausalLM(Qwen3_5ForCausalLM):
    @classmethod
    def layer_mlp(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        act = gated_activation(cfg.hidden_act)
        shared = LlamaMLP(cfg, tp, cfg.shared_expert_intermediate_size)
        routing = Routing(cfg.num_experts_per_tok, renormalize=True)
        return SparseMoE(
            cfg.hidden_size,
            cfg.moe_intermediate_size,
            cfg.num_experts,
            routing,
            act,
            shared=shared,
            shared_gate=True,
        )


class _PublishedCheckpoint:
    """Qwen3.5/3.6 as published: a vision-language checkpoint (``model.language_model.*``
    beside a vision tower, ``model.visual.*``) whose text model is served; the vision tower
    is not read (llmkit takes text with these models)."""

    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel = SINGLE) -> None:
        super().__init__(cfg.get_text_config(), tp)  # type: ignore[call-arg]

    def checkpoint_weights(
        self, weights: Iterable[tuple[str, Weight]]
    ) -> Iterable[tuple[str, Weight]]:
        text = (
            (name.replace("model.language_model.", "model.", 1), weight)
            for name, weight in weights
            if not name.startswith("model.visual.")
        )
        return super().checkpoint_weights(text)  # type: ignore[misc]


class Qwen3_5ForConditionalGeneration(_PublishedCheckpoint, Qwen3_5ForCausalLM):
    pass


class Qwen3_5MoeForConditionalGeneration(_PublishedCheckpoint, Qwen3_5MoeForCausalLM):
    pass
