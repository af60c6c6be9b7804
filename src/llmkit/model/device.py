"""Which device a model runs on, and in which dtypes its weights and KV cache are kept."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from llmkit.config import EngineConfig

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def resolve_device(config: EngineConfig) -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but no CUDA device is available")
    return torch.device(config.device)


def resolve_kv_dtype(
    config: EngineConfig, dtype: torch.dtype, device: torch.device, quantized: bool
) -> torch.dtype:
    """The KV cache's dtype: ``kv_cache_dtype``; with auto, float16 for a quantized model on
    CPU (its keys and values are an int8-activation model's: half the bytes a token), else
    the model's. On GPU the attention kernels read the model's dtype only."""
    if config.kv_cache_dtype == "auto":
        return torch.float16 if device.type == "cpu" and quantized else dtype
    kv: torch.dtype = getattr(torch, config.kv_cache_dtype)
    if device.type != "cpu" and kv != dtype:
        raise ValueError(
            f"kv_cache_dtype={config.kv_cache_dtype!r} differs from the model's {dtype}, "
            "which only the CPU's attention supports"
        )
    return kv


def resolve_dtype(
    config: EngineConfig, hf_config: PretrainedConfig, device: torch.device
) -> torch.dtype:
    if config.dtype != "auto":
        # EngineConfig allows only names that torch's dtypes carry.
        dtype: torch.dtype = getattr(torch, config.dtype)
        return dtype
    if device.type == "cpu":
        return torch.float32  # half-precision matmuls are slow on most CPUs
    # vLLM's rule: keep bf16 checkpoints in bf16, serve fp32/fp16 ones in fp16.
    stored = getattr(hf_config, "torch_dtype", None) or getattr(hf_config, "dtype", None)
    return torch.bfloat16 if stored in (torch.bfloat16, "bfloat16") else torch.float16
