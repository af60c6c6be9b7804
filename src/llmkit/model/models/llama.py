"""Llama-family decoders: Llama, Mistral, Qwen2 (q/k/v bias) and Qwen3 (q/k RMSNorm)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from llmkit.model.context import ForwardContext
from llmkit.model.layers.activation import SiluAndMul
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.layers.rotary import Rope, RotaryEmbedding, apply_rope
from llmkit.model.weights import check_all_loaded, copy_weight

if TYPE_CHECKING:
    from transformers import PretrainedConfig


class LlamaAttention(nn.Module):
    def __init__(
        self, cfg: PretrainedConfig, layer_idx: int, qkv_bias: bool, qk_norm: bool
    ) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.num_heads
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim**-0.5
        self.qkv_proj = nn.Linear(cfg.hidden_size, self.q_size + 2 * self.kv_size, bias=qkv_bias)
        self.o_proj = nn.Linear(
            self.q_size, cfg.hidden_size, bias=bool(getattr(cfg, "attention_bias", False))
        )
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if qk_norm else None

    def forward(self, x: torch.Tensor, ctx: ForwardContext, rope: Rope) -> torch.Tensor:
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(-1, self.num_heads, self.head_dim)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, rope), apply_rope(k, rope)
        k_cache, v_cache = ctx.kv_caches[self.layer_idx]
        ctx.backend.write_kv(k, v, k_cache, v_cache, ctx.meta.slot_mapping)
        out = ctx.backend.forward(q, k_cache, v_cache, ctx.meta, self.scale)
        return self.o_proj(out.reshape(-1, self.q_size))


class LlamaMLP(nn.Module):
    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.act = SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_up_proj(x)))


class LlamaDecoderLayer(nn.Module):
    def __init__(
        self, cfg: PretrainedConfig, layer_idx: int, qkv_bias: bool, qk_norm: bool
    ) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(cfg, layer_idx, qkv_bias, qk_norm)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, ctx: ForwardContext, rope: Rope) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), ctx, rope)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg: PretrainedConfig, qkv_bias: bool, qk_norm: bool) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(cfg, i, qkv_bias, qk_norm) for i in range(cfg.num_hidden_layers)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = RotaryEmbedding(cfg, cfg.max_position_embeddings)

    def forward(
        self,
        input_ids: torch.Tensor,
        ctx: ForwardContext,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``inputs_embeds``: the input rows when they are not only token embeddings (images)."""
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        rope = self.rotary(ctx.positions)
        for layer in self.layers:
            x = layer(x, ctx, rope)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    """Returns final hidden states; :meth:`compute_logits` applies the LM head to chosen rows."""

    qkv_bias = False
    qk_norm = False
    # HF parameter name piece -> (our fused parameter, shard index)
    stacked: ClassVar[dict[str, tuple[str, int]]] = {
        "q_proj": ("qkv_proj", 0),
        "k_proj": ("qkv_proj", 1),
        "v_proj": ("qkv_proj", 2),
        "gate_proj": ("gate_up_proj", 0),
        "up_proj": ("gate_up_proj", 1),
    }

    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.config = cfg
        qkv_bias = self.qkv_bias or getattr(cfg, "attention_bias", False)
        self.model = LlamaModel(cfg, qkv_bias, self.qk_norm)
        self.tie_word_embeddings = bool(getattr(cfg, "tie_word_embeddings", False))
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if self.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.num_kv_heads = cfg.num_key_value_heads
        self.head_dim = head_dim
        self.num_layers = cfg.num_hidden_layers

    def forward(
        self,
        input_ids: torch.Tensor,
        ctx: ForwardContext,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self.model(input_ids, ctx, inputs_embeds)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, tensor in weights:
            if "rotary_emb" in name:
                continue
            if name == "lm_head.weight" and self.tie_word_embeddings:
                continue
            for piece, (fused, shard) in self.stacked.items():
                if f".{piece}." in name:
                    target = name.replace(piece, fused)
                    self._load_shard(params[target], tensor, shard, piece)
                    loaded.add(target)
                    break
            else:
                copy_weight(params, name, tensor)
                loaded.add(name)
        check_all_loaded(params, loaded, {"lm_head.weight"} if self.tie_word_embeddings else set())

    def _load_shard(
        self, param: nn.Parameter, tensor: torch.Tensor, shard: int, piece: str
    ) -> None:
        cfg = self.config
        if piece in ("gate_proj", "up_proj"):
            sizes = [cfg.intermediate_size, cfg.intermediate_size]
        else:
            q = cfg.num_attention_heads * self.head_dim
            kv = cfg.num_key_value_heads * self.head_dim
            sizes = [q, kv, kv]
        start = sum(sizes[:shard])
        param.data[start : start + sizes[shard]].copy_(tensor)


class MistralForCausalLM(LlamaForCausalLM):
    pass


class Qwen2ForCausalLM(LlamaForCausalLM):
    qkv_bias = True


class Qwen3ForCausalLM(LlamaForCausalLM):
    qk_norm = True
