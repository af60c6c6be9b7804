"""PEFT LoRA adapter folders -> checked low-rank weights per layer and projection."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from llmkit.lora_request import LoRARequest

# The projections of a Llama-family decoder layer an adapter may target (HF names).
SUPPORTED_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")
_CONFIG = "adapter_config.json"
_WEIGHTS = "adapter_model.safetensors"


@dataclass(frozen=True)
class LoRALayout:
    """What an adapter must fit: the model's layers and each target's (in, out) features."""

    num_layers: int
    shapes: dict[str, tuple[int, int]]
    max_rank: int


@dataclass(eq=False)
class LoRAAdapter:
    """An adapter's weights on CPU in float32: (layer, target) -> (A ``[r, in]``, B ``[out, r]``)
    with B already multiplied by the adapter's scaling (alpha / r, or alpha / sqrt(r))."""

    request: LoRARequest
    rank: int
    weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]] = field(repr=False)

    @property
    def lora_id(self) -> int:
        return self.request.id


def load_adapter(request: LoRARequest, layout: LoRALayout) -> LoRAAdapter:
    """Read and check ``request``'s folder; ValueError naming what does not fit."""
    where = f"LoRA adapter {request.name!r} ({request.path})"
    config = _read_config(Path(request.path), where)
    tensors = load_file(str(Path(request.path) / _WEIGHTS))
    pairs: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        match = _KEY.search(key)
        if match is None or match.group(2) not in SUPPORTED_TARGETS:
            raise ValueError(
                f"{where} has weight {key!r}: an unsupported target module; llmkit applies "
                f"adapters to {', '.join(SUPPORTED_TARGETS)}"
            )
        layer, target, which = int(match.group(1)), match.group(2), match.group(3)
        pairs.setdefault((layer, target), {})[which] = tensor
    if not pairs:
        raise ValueError(f"{where} holds no LoRA weights")
    alpha, rslora = float(config.get("lora_alpha", 8)), bool(config.get("use_rslora", False))
    weights = {}
    for (layer, target), pair in sorted(pairs.items()):
        name = f"layers.{layer}.{target}"
        if set(pair) != {"A", "B"}:
            raise ValueError(f"{where}: {name} needs both lora_A and lora_B weights")
        a, b = pair["A"].float(), pair["B"].float()
        rank = a.shape[0]
        if rank > layout.max_rank:
            raise ValueError(
                f"{where} has rank {rank}, more than max_lora_rank={layout.max_rank}; start "
                "the engine with a larger max_lora_rank"
            )
        fan_in, fan_out = layout.shapes[target]
        if layer >= layout.num_layers or a.shape != (rank, fan_in) or b.shape != (fan_out, rank):
            raise ValueError(
                f"{where} does not fit the base model: {name} has A {list(a.shape)} and B "
                f"{list(b.shape)}, the model has {layout.num_layers} layers and {target} maps "
                f"{fan_in} -> {fan_out} features (was it trained for another model?)"
            )
        scaling = alpha / (math.sqrt(rank) if rslora else rank)
        weights[(layer, target)] = (a.contiguous(), (b * scaling).contiguous())
    rank = max(a.shape[0] for a, _ in weights.values())
    return LoRAAdapter(request, rank, weights)


def _read_config(root: Path, where: str) -> dict[str, Any]:
    if not (root / _CONFIG).is_file() or not (root / _WEIGHTS).is_file():
        raise ValueError(f"{where} is not a PEFT adapter folder: it needs {_CONFIG} and {_WEIGHTS}")
    try:
        config = json.loads((root / _CONFIG).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: {_CONFIG} is not JSON: {exc}") from None
    if config.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"{where} is a {config['peft_type']} adapter; llmkit serves LORA ones")
    unsupported = [
        ("use_dora", bool(config.get("use_dora"))),
        ("bias", config.get("bias", "none") != "none"),
        ("modules_to_save", bool(config.get("modules_to_save"))),
        ("alpha_pattern", bool(config.get("alpha_pattern"))),
    ]
    for name, present in unsupported:
        if present:
            raise ValueError(f"{where} sets {name}={config[name]!r}, which llmkit does not support")
    targets = config.get("target_modules")
    if isinstance(targets, list):
        # Module names, or paths to them (PEFT saves "all-linear" as every layer's path).
        bad = sorted({t.rsplit(".", 1)[-1] for t in targets} - set(SUPPORTED_TARGETS))
        if bad:
            raise ValueError(
                f"{where} targets {', '.join(bad)}: unsupported target module(s); llmkit "
                f"applies adapters to {', '.join(SUPPORTED_TARGETS)}"
            )
    return dict(config)
