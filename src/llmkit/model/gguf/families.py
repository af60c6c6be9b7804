"""The config fields a family's GGUF metadata gives less directly than a key per field, read as
llama.cpp's loader reads them (a registry entry's ``gguf_config``), and the tensor names of a
family whose files name many of their own. Torch-free."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

SLIDING, FULL = "sliding_attention", "full_attention"

# Qwen3.5's linear-attention layers as llama.cpp names them (its converter writes A_log as
# ssm_a = -exp(A_log), the model turns it back), and the norm after attention.
QWEN35_TENSORS = MappingProxyType(
    {
        "post_attention_norm": "post_attention_layernorm",
        "attn_qkv": "linear_attn.in_proj_qkv",
        "attn_gate": "linear_attn.in_proj_z",
        "ssm_beta": "linear_attn.in_proj_b",
        "ssm_alpha": "linear_attn.in_proj_a",
        "ssm_out": "linear_attn.out_proj",
        "ssm_norm": "linear_attn.norm",
        "ssm_conv1d": "linear_attn.conv1d",
        "ssm_dt": "linear_attn.dt",
        "ssm_a": "linear_attn.ssm_a",
        # The MoE's shared expert and its gate.
        "ffn_gate_inp_shexp": "mlp.shared_expert_gate",
        "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
        "ffn_up_shexp": "mlp.shared_expert.up_proj",
        "ffn_down_shexp": "mlp.shared_expert.down_proj",
    }
)


class Key(Protocol):
    """The file's ``{arch}.<name>`` metadata value, or ``default``; ``ValueError`` if neither."""

    def __call__(self, name: str, default: Any = None) -> Any: ...


def gemma3(key: Key, tensors: Mapping[str, Any], config: dict[str, Any]) -> None:
    """Local and global layers, each kind with its rotary table, and the query scale."""
    layers = config["num_hidden_layers"]
    window = int(key("attention.sliding_window", 0))
    # Without a pattern in the file llama.cpp makes every sixth layer global (the
    # converter writes none for Gemma 3); without a window, all are.
    pattern = key("attention.sliding_window_pattern", 6)
    config["layer_types"] = _layer_types(pattern, layers) if window else [FULL] * layers
    config["sliding_window"] = window or None
    config["rope_parameters"] = {
        FULL: config["rope_parameters"],  # the file's rope.freq_base and scaling: global layers'
        SLIDING: {"rope_type": "default", "rope_theta": float(key("rope.freq_base_swa", 1e4))},
    }
    # llama.cpp scales queries by 1/sqrt(head size), by 1/sqrt(hidden / heads) for the 27B
    # (62 layers) as Google's code does; the converter leaves query_pre_attn_scalar out.
    heads = config["num_attention_heads"]
    config["query_pre_attn_scalar"] = (
        config["hidden_size"] // heads if layers == 62 else config["head_dim"]
    )
    config["final_logit_softcapping"] = float(key("final_logit_softcapping", 0.0)) or None


def _layer_types(pattern: int | list[bool], layers: int) -> list[str]:
    """Each layer's kind from llama.cpp's ``sliding_window_pattern``: a flag per layer (true
    for a local one), or ``n``: the last of every ``n`` layers global (0: none)."""
    if isinstance(pattern, list):
        flags = [bool(p) for p in pattern]
    else:
        flags = [pattern == 0 or i % pattern < pattern - 1 for i in range(layers)]
    return [SLIDING if local else FULL for local in flags]


def gemma4(key: Key, tensors: Mapping[str, Any], config: dict[str, Any]) -> None:
    """Each layer kind's head size, KV heads and rope; shared-KV layers and their MLP width;
    per-layer inputs; the experts; values from the keys' projection (no attn_v)."""
    layers = config["num_hidden_layers"]
    config["layer_types"] = _layer_types(key("attention.sliding_window_pattern"), layers)
    config["sliding_window"] = int(key("attention.sliding_window"))
    full = [i for i, kind in enumerate(config["layer_types"]) if kind == FULL]
    # attention.key_length is the global layers' head size, key_length_swa the local ones'.
    config["head_dim"] = int(key("attention.key_length_swa"))
    kv_heads = _per_layer(key("attention.head_count_kv"), layers)
    local = [i for i in range(layers) if i not in full]
    config["num_key_value_heads"] = kv_heads[local[0]] if local else kv_heads[0]
    global_dim = int(key("attention.key_length"))
    config["per_layer_config"] = {
        i: {"head_dim": global_dim, "num_key_value_heads": kv_heads[i]} for i in full
    }
    shared = int(key("attention.shared_kv_layers", 0))
    config["num_kv_shared_layers"] = shared
    widths = _per_layer(key("feed_forward_length"), layers)
    config["intermediate_size"] = widths[0]
    config["use_double_wide_mlp"] = shared > 0 and widths[-1] == 2 * widths[0]
    own = [i for i in full if i < layers - shared]  # global layers with keys of their own
    config["attention_k_eq_v"] = bool(own) and f"blk.{own[0]}.attn_v.weight" not in tensors
    config["hidden_size_per_layer_input"] = int(key("embedding_length_per_layer_input", 0))
    if "per_layer_token_embd.weight" in tensors:
        config["vocab_size_per_layer_input"] = int(tensors["per_layer_token_embd.weight"].shape[-1])
    config["enable_moe_block"] = "blk.0.ffn_gate_inp.weight" in tensors
    if config["enable_moe_block"]:
        config["num_experts"] = int(key("expert_count"))
        config["top_k_experts"] = int(key("expert_used_count"))
        config["moe_intermediate_size"] = int(key("expert_feed_forward_length"))
    theta = config["rope_parameters"]["rope_theta"]
    config["rope_parameters"] = {
        FULL: _proportional(tensors.get("rope_freqs.weight"), theta, global_dim),
        SLIDING: {"rope_type": "default", "rope_theta": float(key("rope.freq_base_swa", 1e4))},
    }
    config["final_logit_softcapping"] = float(key("final_logit_softcapping", 0.0)) or None


def _per_layer(value: int | list[int], layers: int) -> list[int]:
    """A metadata value given once or per layer, per layer."""
    return [int(v) for v in value] if isinstance(value, list) else [int(value)] * layers


def _proportional(freqs: Any, theta: float, head_dim: int) -> dict[str, Any]:
    """The global layers' rope from the converter's rope_freqs: a factor of 1 for each
    frequency rotated, 1e30 (no rotation) for the rest; HF's proportional rope rotates the
    first ``partial_rotary_factor`` of them."""
    if freqs is None:
        return {"rope_type": "default", "rope_theta": theta}
    rotated = int((freqs.data == 1.0).sum())
    return {
        "rope_type": "proportional",
        "rope_theta": theta,
        "partial_rotary_factor": 2 * rotated / head_dim,
    }


def qwen35(key: Key, tensors: Mapping[str, Any], config: dict[str, Any]) -> None:
    """Qwen3.5's linear-attention shape from the ``ssm.*`` keys, which layers are linear
    (``attention.recurrent_layers``, else every ``full_attention_interval``-th is full), the
    rotated part of each head, and the value heads' order (the converter tiles them)."""
    layers = config["num_hidden_layers"]
    flags = key("attention.recurrent_layers", False)
    if isinstance(flags, list):
        linear = [bool(f) for f in flags[:layers]]
    else:
        interval = int(key("full_attention_interval", 4))
        linear = [(i + 1) % interval != 0 for i in range(layers)]
    config["layer_types"] = ["linear_attention" if f else FULL for f in linear]
    value_heads = int(key("ssm.time_step_rank"))
    config["linear_num_key_heads"] = int(key("ssm.group_count"))
    config["linear_num_value_heads"] = value_heads
    config["linear_key_head_dim"] = int(key("ssm.state_size"))
    config["linear_value_head_dim"] = int(key("ssm.inner_size")) // value_heads
    config["linear_conv_kernel_dim"] = int(key("ssm.conv_kernel"))
    config["linear_value_heads_tiled"] = True
    rotated = int(key("rope.dimension_count", config["head_dim"]))
    config["rope_parameters"]["partial_rotary_factor"] = rotated / config["head_dim"]
