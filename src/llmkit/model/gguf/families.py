"""The config fields a family's GGUF metadata gives less directly than a key per field, read as
llama.cpp's loader reads them (a registry entry's ``gguf_config``). Torch-free."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SLIDING, FULL = "sliding_attention", "full_attention"
Key = Callable[[str, Any], Any]  # a ``{arch}.<name>`` metadata value, or the default given


def gemma3(key: Key, config: dict[str, Any]) -> None:
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
