"""Llama-family decoders: Llama, Mistral, Qwen2 (q/k/v bias) and Qwen3 (q/k RMSNorm), and the
decoder the other families build on.

A family's class declares what differs per layer through two hooks, :meth:`LlamaForCausalLM.
layer_attention` (its :class:`AttentionSpec` fields and which rotary table it reads) and
:meth:`LlamaForCausalLM.layer_mlp` (dense, or a mixture of experts); and, for the whole
model, its norms (``sandwich_norms``), embedding scale and final logit soft-cap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

import torch
from torch import nn

from llmkit.model.attention.base import AttentionSpec
from llmkit.model.context import ForwardContext
from llmkit.model.layers import moe
from llmkit.model.layers.activation import GatedActivation, SiluAndMul
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.layers.parallel_linear import (
    QKVParallelLinear,
    RowParallelLinear,
    merged_column_parallel,
)
from llmkit.model.layers.rotary import Rope, RotaryEmbedding, apply_rope
from llmkit.model.layers.vocab_parallel import ParallelLMHead, VocabParallelEmbedding
from llmkit.model.models.llama_fused import FusedDecode
from llmkit.model.parallel import SINGLE, TensorParallel
from llmkit.model.weights import Weight, check_all_loaded, copy_weight, stacked_pieces

if TYPE_CHECKING:
    from transformers import PretrainedConfig

DEFAULT_ROPE = "default"


@dataclass(frozen=True)
class LayerAttention:
    """How one layer attends: its :class:`AttentionSpec` (less the sinks' values, which are
    the layer's parameters) and the rotary table it reads (a key of the family's ropes)."""

    scale: float
    window: int | None = None
    softcap: float | None = None
    sinks: bool = False
    rope: str = DEFAULT_ROPE


class LlamaAttention(nn.Module):
    def __init__(
        self,
        cfg: PretrainedConfig,
        layer_idx: int,
        qkv_bias: bool,
        qk_norm: bool,
        tp: TensorParallel,
        how: LayerAttention,
    ) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        heads = cfg.num_attention_heads
        self.head_dim = head_dim(cfg)
        self.qkv_proj = QKVParallelLinear(
            cfg.hidden_size, heads, cfg.num_key_value_heads, self.head_dim, qkv_bias, tp
        )
        # This rank's heads: all of them unless the model is sharded.
        self.num_heads = self.qkv_proj.num_heads
        self.num_kv_heads = self.qkv_proj.num_kv_heads
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale, self.window, self.softcap = how.scale, how.window, how.softcap
        self.rope = how.rope
        self.sinks = nn.Parameter(torch.empty(self.num_heads)) if how.sinks else None
        self.o_proj = RowParallelLinear(
            heads * self.head_dim,
            cfg.hidden_size,
            bool(getattr(cfg, "attention_bias", False)),
            tp,
        )
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if qk_norm else None

    @property
    def spec(self) -> AttentionSpec:
        return AttentionSpec(self.scale, self.window, self.softcap, self.sinks)

    def forward(self, x: torch.Tensor, ctx: ForwardContext, rope: Rope) -> torch.Tensor:
        qkv = self.qkv_proj(x)
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        v = qkv[:, self.q_size + self.kv_size :].view(-1, kv_heads, dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k, _ = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
            q = apply_rope(self.q_norm(q.view(-1, heads, dim)), rope)
            k = apply_rope(self.k_norm(k.view(-1, kv_heads, dim)), rope)
        else:  # q and k side by side in each row: rotated in one call
            qk = qkv[:, : self.q_size + self.kv_size].view(-1, heads + kv_heads, dim)
            q, k = apply_rope(qk, rope).split([heads, kv_heads], dim=1)
            q = q.contiguous()  # a copy only with several rows; attention reads q whole
        k_cache, v_cache, meta = ctx.kv(self.layer_idx)
        ctx.backend.write_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        out = ctx.backend.forward(q, k_cache, v_cache, meta, self.spec)
        return self.o_proj(out.reshape(-1, self.q_size))


def attentions(layers: Iterable[nn.Module]) -> list[LlamaAttention]:
    """The attention of each layer that has one (a hybrid's linear-attention layers do not)."""
    return [cast(LlamaAttention, a) for layer in layers if (a := getattr(layer, "self_attn", None))]


def head_dim(cfg: PretrainedConfig) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


class LlamaMLP(nn.Module):
    def __init__(
        self,
        cfg: PretrainedConfig,
        tp: TensorParallel,
        inter: int | None = None,
        act: GatedActivation | None = None,
    ) -> None:
        super().__init__()
        inter = inter or cfg.intermediate_size
        self.gate_up_proj = merged_column_parallel(cfg.hidden_size, [inter, inter], False, tp)
        self.down_proj = RowParallelLinear(inter, cfg.hidden_size, False, tp)
        self.act = act or SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_up_proj(x)))


class LlamaDecoderLayer(nn.Module):
    """Norm, attention, residual; norm, MLP, residual. With ``sandwich_norms`` (Gemma) each
    block's output is normed too before its residual."""

    def __init__(
        self, family: type[LlamaForCausalLM], cfg: PretrainedConfig, i: int, tp: TensorParallel
    ) -> None:
        super().__init__()
        qkv_bias = family.qkv_bias or bool(getattr(cfg, "attention_bias", False))
        how = family.layer_attention(cfg, i)
        self.self_attn = LlamaAttention(cfg, i, qkv_bias, family.qk_norm, tp, how)
        self.mlp = family.layer_mlp(cfg, i, tp)
        hidden, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.sandwich = family.sandwich_norms
        if self.sandwich:
            self.pre_feedforward_layernorm = RMSNorm(hidden, eps)
            self.post_feedforward_layernorm = RMSNorm(hidden, eps)

    def forward(self, x: torch.Tensor, ctx: ForwardContext, ropes: dict[str, Rope]) -> torch.Tensor:
        attn = self.self_attn(self.input_layernorm(x), ctx, ropes[self.self_attn.rope])
        if not self.sandwich:
            x = x + attn
            return x + self.mlp(self.post_attention_layernorm(x))
        x = x + self.post_attention_layernorm(attn)
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))


class LlamaModel(nn.Module):
    def __init__(
        self, family: type[LlamaForCausalLM], cfg: PretrainedConfig, tp: TensorParallel
    ) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(cfg.vocab_size, cfg.hidden_size, tp)
        scale = family.embedding_scale(cfg)
        # A float32 number, as HF's buffer: the rows are multiplied by exactly that value.
        self.embed_scale = None if scale is None else torch.tensor(scale, dtype=torch.float32)
        layers = [family.decoder_layer(cfg, i, tp) for i in range(cfg.num_hidden_layers)]
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        keys = dict.fromkeys(a.rope for a in attentions(layers))
        self.rotaries = nn.ModuleDict(
            {k: family.rotary(cfg, None if k == DEFAULT_ROPE else k) for k in keys}
        )
        self.fused_decode = FusedDecode(tp.size)  # all layers in one C call where they fit

    def forward(
        self,
        input_ids: torch.Tensor,
        ctx: ForwardContext,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``inputs_embeds``: the input rows when they are not only token embeddings (images)."""
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        if self.embed_scale is not None and inputs_embeds is None:
            x = x * self.embed_scale.to(x.dtype)
        fused = None if inputs_embeds is not None else self.fused_decode(self, x, ctx)
        return self.norm(self.run_layers(x, ctx) if fused is None else fused)

    def run_layers(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        """Every layer as a module, on the step's input rows ``x``."""
        ropes = {key: rotary(ctx.positions) for key, rotary in self.rotaries.items()}
        for layer in self.layers:
            x = layer(x, ctx, ropes)
        return x


class LlamaForCausalLM(nn.Module):
    """Returns final hidden states; :meth:`compute_logits` applies the LM head to chosen rows."""

    qkv_bias = False
    qk_norm = False
    sandwich_norms = False
    supports_tensor_parallel = True
    # Our projection under a decoder layer -> the HF modules whose rows it stacks, in order:
    # the one table the checkpoint loader, LoRA and the GGUF loader read.
    projections: ClassVar[dict[str, tuple[str, ...]]] = {
        "self_attn.qkv_proj": ("q_proj", "k_proj", "v_proj"),
        "self_attn.o_proj": ("o_proj",),
        "mlp.gate_up_proj": ("gate_proj", "up_proj"),
        "mlp.down_proj": ("down_proj",),
    }

    # HF parameter name pieces -> ours, where a family's checkpoint names differ (before
    # ``projections`` applies).
    renames: ClassVar[dict[str, str]] = {}

    @classmethod
    def layer_attention(cls, cfg: PretrainedConfig, i: int) -> LayerAttention:
        """How layer ``i`` attends; Llama's every layer alike, over the whole context."""
        return LayerAttention(head_dim(cfg) ** -0.5)

    @classmethod
    def layer_mlp(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        """Layer ``i``'s MLP: dense SwiGLU here."""
        return LlamaMLP(cfg, tp)

    @classmethod
    def decoder_layer(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        """Layer ``i`` as a module, with this family's hooks (Gemma 4's takes more inputs)."""
        return LlamaDecoderLayer(cls, cfg, i, tp)

    @classmethod
    def rotary(cls, cfg: PretrainedConfig, layer_type: str | None) -> RotaryEmbedding:
        """The rotary table of the layers whose ``LayerAttention.rope`` is ``layer_type``."""
        return RotaryEmbedding(cfg, cfg.max_position_embeddings, layer_type)

    @classmethod
    def embedding_scale(cls, cfg: PretrainedConfig) -> float | None:
        """What the token embeddings are multiplied by (Gemma: ``sqrt(hidden_size)``)."""
        return None

    # Embeddings, layers, final norm (Gemma 4's feeds its layers per-layer inputs too).
    stack: ClassVar[type[LlamaModel]] = LlamaModel

    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel = SINGLE) -> None:
        super().__init__()
        self.config = cfg
        self.model = self.stack(type(self), cfg, tp)
        self.tie_word_embeddings = bool(getattr(cfg, "tie_word_embeddings", False))
        self.lm_head = ParallelLMHead(cfg.hidden_size, cfg.vocab_size, tp)
        if self.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.num_layers = cfg.num_hidden_layers
        # (this rank's KV heads, head dim) of each KV cache: here one per layer, which reads
        # ``ctx.kv_caches[layer_idx]``; a family may size them per layer, or keep fewer.
        attns = attentions(self.model.layers)
        self.kv_cache_shapes = [(a.num_kv_heads, a.head_dim) for a in attns]
        self.kv_cache_windows = [a.spec.window for a in attns]  # which keys each one keeps

    def forward(
        self,
        input_ids: torch.Tensor,
        ctx: ForwardContext,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self.model(input_ids, ctx, inputs_embeds)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(hidden)
        cap = getattr(self.config, "final_logit_softcapping", None)
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def checkpoint_weights(
        self, weights: Iterable[tuple[str, Weight]]
    ) -> Iterable[tuple[str, Weight]]:
        """A family's checkpoint tensors as this class names and lays them out (renamed;
        Gemma's norms shifted, gpt-oss's experts split): a hook for the families."""
        for name, weight in weights:
            for old, new in self.renames.items():
                name = name.replace(old, new)
            yield name, weight

    def load_weights(self, weights: Iterable[tuple[str, Weight]]) -> None:
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, weight in self.checkpoint_weights(weights):
            if "rotary_emb" in name:
                continue
            if name == "lm_head.weight" and self.tie_word_embeddings:
                continue
            expert = moe.expert_target(name)
            if expert is not None:
                copy_weight(params, *expert[:1], weight, expert[1])
                loaded.add(expert[0])
                continue
            for piece, (fused, shard) in stacked_pieces(self.projections).items():
                if f".{piece}." in name:
                    target = name.replace(piece, fused)
                    copy_weight(params, target, weight, shard)
                    loaded.add(target)
                    break
            else:
                copy_weight(params, name, weight)
                loaded.add(name)
        check_all_loaded(params, loaded, {"lm_head.weight"} if self.tie_word_embeddings else set())


class MistralForCausalLM(LlamaForCausalLM):
    pass


class Qwen2ForCausalLM(LlamaForCausalLM):
    qkv_bias = True


class Qwen3ForCausalLM(LlamaForCausalLM):
    qk_norm = True
