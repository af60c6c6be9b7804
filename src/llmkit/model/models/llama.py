"""Llama-family decoders: Llama, Mistral, Qwen2 (q/k/v bias) and Qwen3 (q/k RMSNorm)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from llmkit.model.context import ForwardContext
from llmkit.model.layers.activation import SiluAndMul
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
from llmkit.model.weights import Weight, check_all_loaded, copy_weight

if TYPE_CHECKING:
    from transformers import PretrainedConfig


class LlamaAttention(nn.Module):
    def __init__(
        self,
        cfg: PretrainedConfig,
        layer_idx: int,
        qkv_bias: bool,
        qk_norm: bool,
        tp: TensorParallel,
    ) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        heads = cfg.num_attention_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        self.qkv_proj = QKVParallelLinear(
            cfg.hidden_size, heads, cfg.num_key_value_heads, self.head_dim, qkv_bias, tp
        )
        # This rank's heads: all of them unless the model is sharded.
        self.num_heads = self.qkv_proj.num_heads
        self.num_kv_heads = self.qkv_proj.num_kv_heads
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim**-0.5
        self.o_proj = RowParallelLinear(
            heads * self.head_dim,
            cfg.hidden_size,
            bool(getattr(cfg, "attention_bias", False)),
            tp,
        )
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if qk_norm else None

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
        k_cache, v_cache = ctx.kv_caches[self.layer_idx]
        ctx.backend.write_kv(k, v, k_cache, v_cache, ctx.meta.slot_mapping)
        out = ctx.backend.forward(q, k_cache, v_cache, ctx.meta, self.spec)
        return self.o_proj(out.reshape(-1, self.q_size))


class LlamaMLP(nn.Module):
    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel) -> None:
        super().__init__()
        inter = cfg.intermediate_size
        self.gate_up_proj = merged_column_parallel(cfg.hidden_size, [inter, inter], False, tp)
        self.down_proj = RowParallelLinear(inter, cfg.hidden_size, False, tp)
        self.act = SiluAndMul()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_up_proj(x)))


class LlamaDecoderLayer(nn.Module):
    def __init__(
        self,
        cfg: PretrainedConfig,
        layer_idx: int,
        qkv_bias: bool,
        qk_norm: bool,
        tp: TensorParallel,
    ) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(cfg, layer_idx, qkv_bias, qk_norm, tp)
        self.mlp = LlamaMLP(cfg, tp)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, ctx: ForwardContext, rope: Rope) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), ctx, rope)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(
        self, cfg: PretrainedConfig, qkv_bias: bool, qk_norm: bool, tp: TensorParallel
    ) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(cfg.vocab_size, cfg.hidden_size, tp)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(cfg, i, qkv_bias, qk_norm, tp) for i in range(cfg.num_hidden_layers)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = RotaryEmbedding(cfg, cfg.max_position_embeddings)
        self.fused_decode = FusedDecode(tp.size)  # all layers in one C call where they fit

    def forward(
        self,
        input_ids: torch.Tensor,
        ctx: ForwardContext,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``inputs_embeds``: the input rows when they are not only token embeddings (images)."""
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        fused = None if inputs_embeds is not None else self.fused_decode(self, x, ctx)
        return self.norm(self.run_layers(x, ctx) if fused is None else fused)

    def run_layers(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        """Every layer as a module, on the step's input rows ``x``."""
        rope = self.rotary(ctx.positions)
        for layer in self.layers:
            x = layer(x, ctx, rope)
        return x


class LlamaForCausalLM(nn.Module):
    """Returns final hidden states; :meth:`compute_logits` applies the LM head to chosen rows."""

    qkv_bias = False
    qk_norm = False
    supports_tensor_parallel = True
    # Our projection under a decoder layer -> the HF modules whose rows it stacks, in order:
    # the one table the checkpoint loader, LoRA and the GGUF loader read.
    projections: ClassVar[dict[str, tuple[str, ...]]] = {
        "self_attn.qkv_proj": ("q_proj", "k_proj", "v_proj"),
        "self_attn.o_proj": ("o_proj",),
        "mlp.gate_up_proj": ("gate_proj", "up_proj"),
        "mlp.down_proj": ("down_proj",),
    }

    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel = SINGLE) -> None:
        super().__init__()
        self.config = cfg
        qkv_bias = self.qkv_bias or getattr(cfg, "attention_bias", False)
        self.model = LlamaModel(cfg, qkv_bias, self.qk_norm, tp)
        self.tie_word_embeddings = bool(getattr(cfg, "tie_word_embeddings", False))
        self.lm_head = ParallelLMHead(cfg.hidden_size, cfg.vocab_size, tp)
        if self.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        first = self.model.layers[0]
        assert isinstance(first, LlamaDecoderLayer)
        attn = first.self_attn
        self.num_kv_heads = attn.num_kv_heads  # this rank's: its KV cache holds only these
        self.head_dim = attn.head_dim
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

    def load_weights(self, weights: Iterable[tuple[str, Weight]]) -> None:
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, weight in weights:
            if "rotary_emb" in name:
                continue
            if name == "lm_head.weight" and self.tie_word_embeddings:
                continue
            for piece, (fused, shard) in _stacked(self.projections).items():
                if f".{piece}." in name:
                    target = name.replace(piece, fused)
                    copy_weight(params, target, weight, shard)
                    loaded.add(target)
                    break
            else:
                copy_weight(params, name, weight)
                loaded.add(name)
        check_all_loaded(params, loaded, {"lm_head.weight"} if self.tie_word_embeddings else set())


def _stacked(projections: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, int]]:
    """HF parameter name piece -> (our fused parameter, its shard), for the stacked ones."""
    return {
        piece: (path.rpartition(".")[2], shard)
        for path, pieces in projections.items()
        if len(pieces) > 1
        for shard, piece in enumerate(pieces)
    }


class MistralForCausalLM(LlamaForCausalLM):
    pass


class Qwen2ForCausalLM(LlamaForCausalLM):
    qkv_bias = True


class Qwen3ForCausalLM(LlamaForCausalLM):
    qk_norm = True
