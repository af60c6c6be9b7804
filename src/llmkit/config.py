"""EngineConfig: every engine setting in one dataclass, validated once and passed down."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

_DTYPES = ("auto", "float32", "float16", "bfloat16")
_DEVICES = ("auto", "cpu", "cuda")
_BACKENDS = ("auto", "torch", "triton")
_TASKS = ("auto", "generate", "embed")


@dataclass
class EngineConfig:
    """Engine settings; names follow vLLM's ``EngineArgs`` where one exists."""

    model: str
    tokenizer: str | None = None
    dtype: str = "auto"
    seed: int = 0
    max_model_len: int | None = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    block_size: int = 16
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    gpu_memory_utilization: float = 0.9
    device: str = "auto"
    num_kv_blocks: int | None = None
    # KV cache budget on CPU, where there is no device memory to measure (vLLM's
    # VLLM_CPU_KVCACHE_SPACE, as a field rather than an environment variable).
    cpu_kv_cache_gib: float = 2.0
    attention_backend: str = "auto"
    task: str = "auto"
    # vLLM's --max-logprobs: the most logprobs a request may ask for.
    max_logprobs: int = 20

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model must be a model directory or a known model name, got ''")
        _choice("dtype", self.dtype, _DTYPES)
        _choice("device", self.device, _DEVICES)
        _choice("attention_backend", self.attention_backend, _BACKENDS)
        _choice("task", self.task, _TASKS)
        _at_least("max_num_seqs", self.max_num_seqs, 1)
        _at_least("max_logprobs", self.max_logprobs, 0)
        if self.block_size not in (1, 2, 4, 8, 16, 32, 64, 128):
            raise ValueError(
                f"block_size must be a power of two from 1 to 128, got {self.block_size}"
            )
        if self.max_model_len is not None:
            _at_least("max_model_len", self.max_model_len, 1)
        if self.max_num_batched_tokens is not None:
            _at_least("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        if self.num_kv_blocks is not None:
            _at_least("num_kv_blocks", self.num_kv_blocks, 1)
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(
                "gpu_memory_utilization must be in (0, 1], "
                f"got {self.gpu_memory_utilization}"
            )
        if not self.cpu_kv_cache_gib > 0:
            raise ValueError(f"cpu_kv_cache_gib must be > 0, got {self.cpu_kv_cache_gib}")

    @classmethod
    def from_kwargs(cls, model: str, **kwargs: Any) -> EngineConfig:
        """Build from keyword arguments, rejecting names that are not fields."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"unknown EngineConfig field(s): {', '.join(unknown)}")
        return cls(model=model, **kwargs)


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _at_least(name: str, value: int, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
