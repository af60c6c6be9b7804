"""gpt-oss: attention with a learned sink per head, a 128-token window on every other layer
(``layer_types``), YaRN rope, biases on q/k/v/o; every layer a mixture of experts whose router
has a bias and picks the top-k logits before its softmax, whose experts have biases and run
the clamped SwiGLU (``swiglu_alpha``, ``swiglu_limit``).

HF's checkpoint stacks each layer's experts transposed (``gate_up_proj`` ``[E, H, 2I]``, gate
and up interleaved column by column; ``down_proj`` ``[E, I, H]``): they load here as every
expert's gate, up and down projections in our layout, the way llama.cpp's converter splits
them into its ``ffn_{gate,up,down}_exps`` tensors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, ClassVar

from torch import nn

from llmkit.model.layers.activation import ClampedSwiGLU
from llmkit.model.layers.moe import Routing, SparseMoE
from llmkit.model.models.llama import LayerAttention, LlamaForCausalLM, head_dim
from llmkit.model.parallel import TensorParallel
from llmkit.model.weights import Weight, read

if TYPE_CHECKING:
    from transformers import PretrainedConfig

_STACKED = ("gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias")


class GptOssForCausalLM(LlamaForCausalLM):
    supports_tensor_parallel = False  # experts and sinks are not sharded over ranks
    renames: ClassVar[dict[str, str]] = {
        ".mlp.router.": ".mlp.gate.",
        ".self_attn.sinks.weight": ".self_attn.sinks",  # a GGUF file's name for it
    }

    @classmethod
    def layer_attention(cls, cfg: PretrainedConfig, i: int) -> LayerAttention:
        windowed = cfg.layer_types[i] == "sliding_attention"
        return LayerAttention(
            head_dim(cfg) ** -0.5, window=cfg.sliding_window if windowed else None, sinks=True
        )

    @classmethod
    def layer_mlp(cls, cfg: PretrainedConfig, i: int, tp: TensorParallel) -> nn.Module:
        return SparseMoE(
            cfg.hidden_size,
            cfg.intermediate_size,
            cfg.num_local_experts,
            Routing(cfg.num_experts_per_tok, softmax_after_top_k=True),
            ClampedSwiGLU(cfg.swiglu_alpha, cfg.swiglu_limit),
            router_bias=True,
            expert_bias=True,
        )

    def checkpoint_weights(
        self, weights: Iterable[tuple[str, Weight]]
    ) -> Iterator[tuple[str, Weight]]:
        for name, weight in super().checkpoint_weights(weights):
            base, _, kind = name.rpartition(".experts.")
            if kind not in _STACKED:
                yield name, weight
                continue
            suffix = "bias" if kind.endswith("_bias") else "weight"
            # Weights [E, in, out] -> [E, out, in]; biases are [E, out] already.
            tensor = read(weight) if suffix == "bias" else read(weight).transpose(1, 2)
            if kind.startswith("down_proj"):
                yield f"{base}.experts.down_proj.{suffix}", tensor
            else:  # gate and up outputs interleaved: even ones the gate's, odd ones up's
                yield f"{base}.experts.gate_proj.{suffix}", tensor[:, 0::2]
                yield f"{base}.experts.up_proj.{suffix}", tensor[:, 1::2]
