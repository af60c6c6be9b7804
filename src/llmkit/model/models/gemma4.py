"""Gemma 4 (text): Gemma 3's interleaved local and global layers, each kind with its own head
size, KV heads and rotary table (the global one rotating a part of each head), and per-layer
inputs: a second embedding of the tokens, plus a projection of the first, gives each layer
a few numbers of its own per token. The last ``num_kv_shared_layers`` layers keep no keys or
values: they read the KV cache of the last earlier layer of their kind, so the model keeps
fewer KV caches than it has layers. The layers are in :mod:`.gemma4_layers`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from llmkit.model.context import ForwardContext
from llmkit.model.layers.moe import unfuse_experts
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.layers.parallel_linear import RowParallelLinear
from llmkit.model.layers.rotary import RotaryEmbedding
from llmkit.model.layers.vocab_parallel import VocabParallelEmbedding
from llmkit.model.models.gemma3 import SLIDING
from llmkit.model.models.gemma4_layers import Gemma4DecoderLayer
from llmkit.model.models.llama import LayerAttention, LlamaForCausalLM, LlamaModel
from llmkit.model.parallel import SINGLE, TensorParallel
from llmkit.model.weights import Weight

if TYPE_CHECKING:
    from transformers import PretrainedConfig

# A shared-KV layer's projections and norms of its own keys and values, which checkpoints
# may carry (transformers ignores them) and the layer has no use for.
_UNUSED_KV = (".self_attn.k_proj.", ".self_attn.v_proj.", ".self_attn.k_norm.")


class Gemma4Model(LlamaModel):
    """The decoder stack, its layers taking each token's per-layer input beside its row."""

    def __init__(
        self, family: type[LlamaForCausalLM], cfg: PretrainedConfig, tp: TensorParallel
    ) -> None:
        super().__init__(family, cfg, tp)
        self.layer_dim = cfg.hidden_size_per_layer_input or 0
        if self.layer_dim:
            width = cfg.num_hidden_layers * self.layer_dim  # every layer's, side by side
            self.embed_tokens_per_layer = VocabParallelEmbedding(
                cfg.vocab_size_per_layer_input, width, SINGLE
            )
            self.per_layer_model_projection = RowParallelLinear(
                cfg.hidden_size, width, False, SINGLE
            )
            self.per_layer_projection_norm = RMSNorm(self.layer_dim, cfg.rms_norm_eps)
            # float32 numbers, as HF's buffer and constants
            self.layer_embed_scale = torch.tensor(self.layer_dim**0.5, dtype=torch.float32)
            self.projection_scale = cfg.hidden_size**-0.5

    def forward(
        self,
        input_ids: torch.Tensor,
        ctx: ForwardContext,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        if self.embed_scale is not None and inputs_embeds is None:
            x = x * self.embed_scale.to(x.dtype)
        inputs = self.per_layer_inputs(input_ids, x) if self.layer_dim else None
        ropes = {key: rotary(ctx.positions) for key, rotary in self.rotaries.items()}
        for i, layer in enumerate(self.layers):
            x = layer(x, ctx, ropes, None if inputs is None else inputs[:, i])
        return self.norm(x)

    def per_layer_inputs(self, input_ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``[T, layers, hidden_size_per_layer_input]``: the tokens' per-layer embeddings and
        the projection of their rows ``x``, RMS-normed; their sum times ``sqrt(1/2)``."""
        shape = (x.shape[0], len(self.layers), self.layer_dim)
        embedded = self.embed_tokens_per_layer(input_ids)
        embedded = (embedded * self.layer_embed_scale.to(embedded.dtype)).view(shape)
        projected = self.per_layer_model_projection(x) * self.projection_scale
        projected = self.per_layer_projection_norm(projected.view(shape))
        return (projected + embedded) * 2.0**-0.5


class Gemma4ForCausalLM(LlamaForCausalLM):
    stack = Gemma4Model
    supports_tensor_parallel = False
    # The router's projection is a float parameter of ours (Gemma4Router), not a module; and
    # the GGUF file's names of the scales (the router's and the experts' on their tensors).
    renames: ClassVar[dict[str, str]] = {
        "router.proj.weight": "router.proj",
        "router.proj.scale": "router.scale",
        "experts.down_proj.scale": "router.per_expert_scale",
        "layer_scalar.weight": "layer_scalar",
    }

    def __init__(self, cfg: PretrainedConfig, tp: TensorParallel = SINGLE) -> None:
        if cfg.use_bidirectional_attention == "all":
            raise ValueError(
                "Gemma 4 with use_bidirectional_attention='all' attends both ways; llmkit "
                "runs Gemma 4's causal attention only"
            )
        super().__init__(cfg, tp)
        # One cache per layer that keeps its keys and values: all but the shared last ones.
        del self.kv_cache_shapes[cfg.num_hidden_layers - cfg.num_kv_shared_layers :]
        del self.kv_cache_windows[cfg.num_hidden_layers - cfg.num_kv_shared_layers :]

    @classmethod
    def layer_attention(cls, cfg: PretrainedConfig, i: int) -> LayerAttention:
        kind = cfg.layer_types[i]
        window = cfg.sliding_window if kind == SLIDING else None
        return LayerAttention(1.0, window=window, rope=kind)  # the q/k norms size the scores

    @classmethod
    def decoder_layer(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        return Gemma4DecoderLayer(cls, cfg, i)

    @classmethod
    def rotary(cls, cfg: PretrainedConfig, layer_type: str | None) -> RotaryEmbedding:
        # The layer kind's config (per_layer_config is indexed by layer or by kind): its head
        # size is the table's width.
        per_kind: Any = cfg.per_layer_config
        return RotaryEmbedding(per_kind[layer_type], cfg.max_position_embeddings, layer_type)

    @classmethod
    def embedding_scale(cls, cfg: PretrainedConfig) -> float | None:
        return float(cfg.hidden_size**0.5)

    def checkpoint_weights(
        self, weights: Iterable[tuple[str, Weight]]
    ) -> Iterable[tuple[str, Weight]]:
        """Shared-KV layers' unused key/value tensors dropped; the experts' fused gate/up
        tensor ``[E, 2I, H]`` split in the gate and up projections the loader stacks."""
        first_shared = self.config.num_hidden_layers - self.config.num_kv_shared_layers
        for name, weight in super().checkpoint_weights(weights):
            if any(piece in name for piece in _UNUSED_KV) and _layer(name) >= first_shared:
                continue
            yield from unfuse_experts(name, weight)


def _layer(name: str) -> int:
    """The layer index in ``model.layers.<i>.<...>``."""
    return int(name.split(".")[2])
