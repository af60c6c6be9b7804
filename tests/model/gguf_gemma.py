"""What llama.cpp's converter (conversion/gemma.py, on its TextModel base) writes for Gemma
beyond what every decoder's file has: the tensor names of its own table, the rope tables of
both layer kinds, the sliding window, the soft-cap, and Gemma 3's norms shifted by one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gguf
import torch


@dataclass(frozen=True)
class Family:
    """How the converter writes one family's file."""

    arch: gguf.MODEL_ARCH
    metadata: Callable[[gguf.GGUFWriter, dict[str, Any]], None]
    norm_shift: float  # added to every ``*norm.weight`` (Gemma3RMSNorm's ``1 + w``)

    def tensor(self, name: str, tensor: torch.Tensor, blocks: int) -> tuple[str, torch.Tensor]:
        """The GGUF name and contents of HF tensor ``name``."""
        gguf_name = gguf.get_tensor_name_map(self.arch, blocks).get_name(
            name, try_suffixes=(".weight", ".bias")
        )
        assert gguf_name is not None, name
        return gguf_name, tensor + self.norm_shift if name.endswith("norm.weight") else tensor


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


FAMILIES = {"gemma3": Family(gguf.MODEL_ARCH.GEMMA3, _gemma3, 1.0)}
