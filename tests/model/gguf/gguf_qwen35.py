"""What llama.cpp's converter (conversion/qwen.py: Qwen3NextModel, _LinearAttentionVReorderBase)
writes for Qwen3.5 beyond what every decoder's file has: the linear-attention shape as
``ssm.*`` keys and which layers are recurrent; ``A_log`` as ``ssm_a = -exp(A_log)``, the
convolution squeezed, ``dt_bias`` as ``ssm_dt.bias``; every norm but the gated one shifted by
one; the value heads reordered from grouped by key head to tiled; the MoE's fused experts
split in gate and up."""

from __future__ import annotations

from typing import Any

import gguf
import torch
from tests.model.gguf.gguf_gemma import Family, Tensors


def _metadata(writer: gguf.GGUFWriter, cfg: dict[str, Any]) -> None:
    arch = writer.arch
    writer.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    writer.add_uint32(f"{arch}.ssm.conv_kernel", cfg["linear_conv_kernel_dim"])
    writer.add_uint32(f"{arch}.ssm.state_size", cfg["linear_key_head_dim"])
    writer.add_uint32(f"{arch}.ssm.group_count", cfg["linear_num_key_heads"])
    writer.add_uint32(f"{arch}.ssm.time_step_rank", cfg["linear_num_value_heads"])
    inner = cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"]
    writer.add_uint32(f"{arch}.ssm.inner_size", inner)
    recurrent = [kind == "linear_attention" for kind in cfg["layer_types"]]
    writer.add_array(f"{arch}.attention.recurrent_layers", recurrent)
    writer.add_uint32(f"{arch}.full_attention_interval", 4)
    rotated = int(cfg["head_dim"] * cfg["rope_parameters"]["partial_rotary_factor"])
    writer.add_rope_dimension_count(rotated)
    writer.add_array(f"{arch}.rope.dimension_sections", [11, 11, 10, 0])


def _tiled(t: torch.Tensor, dim: int, cfg: dict[str, Any], head_dim: int) -> torch.Tensor:
    """_reorder_v_heads: value heads grouped by key head -> tiled, along ``dim``."""
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    shape = list(t.shape)
    grouped = t.reshape(*shape[:dim], hk, hv // hk, head_dim, *shape[dim + 1 :])
    return grouped.transpose(dim, dim + 1).reshape(shape)


def _convert(tensors: Tensors, cfg: dict[str, Any]) -> Tensors:
    out: Tensors = {}
    key_dim = cfg["linear_key_head_dim"] * cfg["linear_num_key_heads"]
    dv = cfg["linear_value_head_dim"]
    for name, t in tensors.items():
        if name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            t = t + 1
        if name.endswith(".in_proj_qkv.weight"):
            t = torch.cat([t[: 2 * key_dim], _tiled(t[2 * key_dim :], 0, cfg, dv)])
        elif name.endswith(".in_proj_z.weight"):
            t = _tiled(t, 0, cfg, dv)
        elif name.endswith((".in_proj_a.weight", ".in_proj_b.weight")):
            t = _tiled(t, 0, cfg, 1)
        elif name.endswith(".out_proj.weight"):
            t = _tiled(t, 1, cfg, dv)
        elif name.endswith(".A_log"):
            t = -torch.exp(_tiled(t, 0, cfg, 1))
        elif name.endswith(".dt_bias"):
            t, name = _tiled(t, 0, cfg, 1), name.replace(".dt_bias", ".dt_proj.bias")
        elif name.endswith(".conv1d.weight"):
            t = t.squeeze(1)
            t = torch.cat([t[: 2 * key_dim], _tiled(t[2 * key_dim :], 0, cfg, dv)])
        if name.endswith(".experts.gate_up_proj"):
            gate, up = t.chunk(2, dim=1)
            out[name.replace("gate_up_proj", "gate_proj.weight")] = gate
            out[name.replace("gate_up_proj", "up_proj.weight")] = up
        elif name.endswith(".experts.down_proj"):
            out[name + ".weight"] = t
        else:
            out[name] = t
    return out


QWEN35 = {
    "qwen35": Family(gguf.MODEL_ARCH.QWEN35, _metadata, convert=_convert),
    "qwen35moe": Family(gguf.MODEL_ARCH.QWEN35MOE, _metadata, convert=_convert),
}
