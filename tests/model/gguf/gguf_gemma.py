"""What llama.cpp's converter (conversion/gemma.py, on its TextModel base) writes for Gemma
beyond what every decoder's file has: the tensor names of its own table, the rope tables of
both layer kinds, the sliding window, the soft-cap; Gemma 3's norms shifted by one; Gemma 4's
per-layer metadata, its scales' names and the rope_freqs table of its proportional rope."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gguf
import torch

Tensors = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Family:
    """How the converter writes one family's file."""

    arch: gguf.MODEL_ARCH
    metadata: Callable[[gguf.GGUFWriter, dict[str, Any]], None]
    norm_shift: float = 0.0  # added to every ``*norm.weight`` (Gemma3RMSNorm's ``1 + w``)
    extra: Callable[[dict[str, Any]], Tensors] = lambda cfg: {}  # tensors it makes up
    # What it does to the HF tensors before naming them (Qwen3.5's), by HF name.
    convert: Callable[[Tensors, dict[str, Any]], Tensors] = lambda tensors, cfg: tensors

    def tensors(self, tensors: Tensors, cfg: dict[str, Any]) -> Tensors:
        """The file's tensors, by GGUF name, from the HF folder's."""
        blocks = cfg["num_hidden_layers"]
        out = dict(self.extra(cfg))
        for name, tensor in tensors.items():
            if name.endswith("norm.weight"):
                tensor = tensor + self.norm_shift
            out[_gemma4_name(name) or self._mapped(name, blocks)] = tensor
        return out

    def _mapped(self, name: str, blocks: int) -> str:
        if name.endswith(("layer_scalar", "experts.gate_up_proj", "experts.down_proj")):
            name += ".weight"  # Gemma4Model.filter_tensors
        gguf_name = gguf.get_tensor_name_map(self.arch, blocks).get_name(
            name, try_suffixes=(".weight", ".bias")
        )
        assert gguf_name is not None, name
        return gguf_name


def _gemma4_name(name: str) -> str | None:
    """Gemma4Model.modify_tensors: the router's scale, and each expert's on its down tensor."""
    m = re.fullmatch(r"model\.layers\.(\d+)\.router\.(scale|per_expert_scale)", name)
    if m is None:
        return None
    return f"blk.{m[1]}.{'ffn_gate_inp' if m[2] == 'scale' else 'ffn_down_exps'}.scale"


def _rope(writer: gguf.GGUFWriter, cfg: dict[str, Any]) -> None:
    """The global layers' rope (base and linear scaling), the local layers' base."""
    rope = cfg["rope_parameters"]
    full = rope.get("full_attention", rope)
    writer.add_rope_freq_base(full["rope_theta"])
    if full.get("rope_type") == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(full["factor"])
    if "sliding_attention" in rope:
        writer.add_rope_freq_base_swa(rope["sliding_attention"]["rope_theta"])


def _gemma3(writer: gguf.GGUFWriter, cfg: dict[str, Any]) -> None:
    _rope(writer, cfg)
    assert cfg.get("attn_logit_softcapping") is None  # the converter's own check
    if cfg.get("final_logit_softcapping"):
        writer.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    if cfg.get("sliding_window_pattern") != 1:
        writer.add_sliding_window(cfg["sliding_window"])


def _global(cfg: dict[str, Any], field: str) -> int:
    """A global layer's ``field`` from per_layer_config (config.json's keys are strings)."""
    for layer, overrides in cfg["per_layer_config"].items():
        if cfg["layer_types"][int(layer)] == "full_attention" and field in overrides:
            return int(overrides[field])
    raise AssertionError(f"no global layer sets {field}")


def _gemma4(writer: gguf.GGUFWriter, cfg: dict[str, Any]) -> None:
    _gemma3(writer, cfg)
    layers, shared = cfg["num_hidden_layers"], cfg["num_kv_shared_layers"]
    if cfg.get("num_experts"):
        writer.add_expert_count(cfg["num_experts"])
        writer.add_expert_used_count(cfg["top_k_experts"])
        writer.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    writer.add_shared_kv_layers(shared)
    writer.add_embedding_length_per_layer_input(cfg.get("hidden_size_per_layer_input") or 0)
    local = [kind == "sliding_attention" for kind in cfg["layer_types"]]
    writer.add_sliding_window_pattern(local)
    head_full = _global(cfg, "head_dim")
    writer.add_key_length(head_full)
    writer.add_value_length(head_full)
    writer.add_key_length_swa(cfg["head_dim"])
    writer.add_value_length_swa(cfg["head_dim"])
    if cfg.get("use_double_wide_mlp"):
        inter = cfg["intermediate_size"]
        writer.add_feed_forward_length(
            [inter * (1 + (i >= layers - shared)) for i in range(layers)]
        )
    kv_full, kv_local = _global(cfg, "num_key_value_heads"), cfg["num_key_value_heads"]
    writer.add_head_count_kv([kv_local if swa else kv_full for swa in local])
    writer.add_rope_dimension_count(head_full)
    writer.add_rope_dimension_count_swa(cfg["head_dim"])


def _rope_freqs(cfg: dict[str, Any]) -> Tensors:
    """Gemma4Model.generate_extra_tensors: 1 for each rotated frequency of a global head,
    1e30 (none) for the rest."""
    head = _global(cfg, "head_dim")
    rotated = int(head * cfg["rope_parameters"]["full_attention"]["partial_rotary_factor"] / 2)
    values = [1.0] * rotated + [1e30] * (head // 2 - rotated)
    return {"rope_freqs.weight": torch.tensor(values, dtype=torch.float32)}


FAMILIES = {
    "gemma3": Family(gguf.MODEL_ARCH.GEMMA3, _gemma3, norm_shift=1.0),
    "gemma4": Family(gguf.MODEL_ARCH.GEMMA4, _gemma4, extra=_rope_freqs),
}
