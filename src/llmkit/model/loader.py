"""HF model directory -> one of our native modules: config via AutoConfig, weights from safetensors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from llmkit.model.demo import resolve_model
from llmkit.model.models.bert import BertForMaskedLM, BertModel
from llmkit.model.models.llama import (
    LlamaForCausalLM,
    MistralForCausalLM,
    Qwen2ForCausalLM,
    Qwen3ForCausalLM,
)

ARCHITECTURES: dict[str, type[nn.Module]] = {
    "BertModel": BertModel,
    "BertForMaskedLM": BertForMaskedLM,
    "LlamaForCausalLM": LlamaForCausalLM,
    "MistralForCausalLM": MistralForCausalLM,
    "Qwen2ForCausalLM": Qwen2ForCausalLM,
    "Qwen3ForCausalLM": Qwen3ForCausalLM,
}


__all__ = ["ARCHITECTURES", "load_hf_config", "load_model", "model_class", "resolve_model"]


def load_hf_config(path: str):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(path)


def model_class(hf_config) -> type[nn.Module]:
    names = list(getattr(hf_config, "architectures", None) or [])
    for name in names:
        if name in ARCHITECTURES:
            return ARCHITECTURES[name]
    raise ValueError(
        f"unsupported model architecture {', '.join(names) or '(none given)'}; "
        f"llmkit supports {', '.join(sorted(ARCHITECTURES))}"
    )


def load_model(path: str, hf_config, dtype: torch.dtype, device: torch.device) -> nn.Module:
    cls = model_class(hf_config)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(hf_config)
    finally:
        torch.set_default_dtype(previous)
    model.load_weights(iter_weights(path))
    return model.eval()


def iter_weights(path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor of a checkpoint, sharded (``model.safetensors.index.json``) or not."""
    root = Path(path)
    index = root / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = sorted(p.name for p in root.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no *.safetensors weights found in {path}")
    for name in files:
        with safe_open(str(root / name), framework="pt") as f:
            for key in f.keys():
                yield key, f.get_tensor(key)
