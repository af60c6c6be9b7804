"""EngineConfig's checks: each field's allowed values, the rules between fields, and
speculative_config's settings (vLLM's)."""

from __future__ import annotations

from typing import Any

DTYPES = ("auto", "float32", "float16", "bfloat16")
DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "torch", "triton")
TASKS = ("auto", "generate", "embed")
MODALITIES = ("image",)
QUANTIZATIONS = ("int8", "int4", "w8a8", "w4a8")
INT4_GROUP_SIZES = (32, 64, 128, 256)
# vLLM V1's default: as many as fit in the context.
DEFAULT_IMAGE_LIMIT = 999


# disable_by_batch_size (vLLM's, >= 2): no proposals in a step with that many requests running
_SPEC = {"num_speculative_tokens": 4, "disable_by_batch_size": None}
_NGRAM = {**_SPEC, "prompt_lookup_max": 5, "prompt_lookup_min": 1}
_DRAFT = {**_SPEC, "model": None}
_SPEC_DEFAULTS: dict[Any, dict[str, Any]] = {"ngram": _NGRAM, "draft_model": _DRAFT}  # vLLM's


def choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def at_least(name: str, value: int | None, low: int, unset: object = ...) -> None:
    """``value`` an integer >= ``low``, or ``unset`` (an optional field's None)."""
    if value is unset:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def positive(name: str, value: float | None, zero: bool = False, unset: object = ...) -> None:
    """``value`` a number > 0 (``zero``: >= 0), or ``unset`` (an optional field's None)."""
    if value is unset:
        return
    if not isinstance(value, int | float) or not (value >= 0 if zero else value > 0):
        raise ValueError(f"{name} must be {'>=' if zero else '>'} 0, got {value!r}")


def speculative_settings(spec: object) -> dict[str, Any]:
    """vLLM's settings checked, with the method's defaults (``_SPEC_DEFAULTS``) filled in."""
    if not isinstance(spec, dict):
        raise ValueError(f"speculative_config must be a mapping, not {spec!r}")
    # vLLM's rule: a draft model named without a method is a draft model.
    method = spec.get("method") or ("draft_model" if spec.get("model") else None)
    choice("speculative_config's method", method, tuple(_SPEC_DEFAULTS))
    defaults = _SPEC_DEFAULTS[method]
    unknown = sorted(set(spec) - {"method", *defaults})
    if unknown:
        raise ValueError(f"speculative_config has unknown field(s) for {method}: {unknown}")
    out = {**defaults, **spec, "method": method}
    for name in set(defaults) - {"model", "disable_by_batch_size"}:
        at_least(f"speculative_config's {name}", out[name], 1)
    at_least("speculative_config's disable_by_batch_size", out["disable_by_batch_size"], 2, None)
    if method == "ngram" and out["prompt_lookup_min"] > out["prompt_lookup_max"]:
        raise ValueError("speculative_config's prompt_lookup_min must be <= prompt_lookup_max")
    if method == "draft_model" and not (isinstance(out["model"], str) and out["model"]):
        raise ValueError(f"speculative_config's model must name the draft model: {out['model']!r}")
    return out


def check_engine_config(config: Any) -> None:
    """Every field of ``config`` (an EngineConfig: typed loosely, as engine.py imports this
    module) within its allowed values, and the fields' rules between them (ValueError naming
    the field); fills in speculative_config's defaults."""
    if not config.model:
        raise ValueError("model must be a model directory or a known model name, got ''")
    choice("dtype", config.dtype, DTYPES)
    choice("kv_cache_dtype", config.kv_cache_dtype, DTYPES)
    choice("device", config.device, DEVICES)
    choice("attention_backend", config.attention_backend, BACKENDS)
    choice("task", config.task, TASKS)
    at_least("max_num_seqs", config.max_num_seqs, 1)
    at_least("max_logprobs", config.max_logprobs, 0)
    at_least("tensor_parallel_size", config.tensor_parallel_size, 1)
    if config.block_size not in (1, 2, 4, 8, 16, 32, 64, 128):
        raise ValueError(
            f"block_size must be a power of two from 1 to 128, got {config.block_size}"
        )
    at_least("max_model_len", config.max_model_len, 1, None)
    at_least("max_num_batched_tokens", config.max_num_batched_tokens, 1, None)
    at_least("num_kv_blocks", config.num_kv_blocks, 1, None)
    if not 0.0 < config.gpu_memory_utilization <= 1.0:
        raise ValueError(
            f"gpu_memory_utilization must be in (0, 1], got {config.gpu_memory_utilization}"
        )
    at_least("max_queued_requests", config.max_queued_requests, 1, None)
    at_least("max_queued_tokens", config.max_queued_tokens, 1, None)
    at_least("max_loras", config.max_loras, 1)
    at_least("max_lora_rank", config.max_lora_rank, 1)
    if config.async_scheduling and config.tensor_parallel_size > 1:
        # The workers read each step's token ids from the host.
        raise ValueError("async_scheduling does not work with tensor_parallel_size > 1")
    if config.enable_lora and config.tensor_parallel_size > 1:
        # The LoRA slices are sized from the whole projection, not a rank's shard of it.
        raise ValueError("enable_lora does not work with tensor_parallel_size > 1 yet")
    if config.quantization is not None:
        choice("quantization", config.quantization, QUANTIZATIONS)
        if config.tensor_parallel_size > 1:
            raise ValueError("quantization does not work with tensor_parallel_size > 1 yet")
    if config.quantization_group_size not in INT4_GROUP_SIZES:
        raise ValueError(
            "quantization_group_size must be one of "
            f"{', '.join(map(str, INT4_GROUP_SIZES))}, got {config.quantization_group_size!r}"
        )
    positive("max_queue_wait_s", config.max_queue_wait_s, unset=None)
    positive("watchdog_timeout_s", config.watchdog_timeout_s)
    positive("cpu_kv_cache_gib", config.cpu_kv_cache_gib)
    positive("prompt_cache_gib", config.prompt_cache_gib, zero=True)
    positive("prompt_cache_disk_gib", config.prompt_cache_disk_gib, zero=True)
    if config.limit_mm_per_prompt is not None:
        if not isinstance(config.limit_mm_per_prompt, dict):
            raise ValueError(
                'limit_mm_per_prompt must be a mapping like {"image": 2}, got '
                f"{config.limit_mm_per_prompt!r}"
            )
        for modality, limit in config.limit_mm_per_prompt.items():
            choice("limit_mm_per_prompt's modality", modality, MODALITIES)
            at_least(f"limit_mm_per_prompt[{modality!r}]", limit, 0)

    if config.speculative_config is not None:
        config.speculative_config = speculative_settings(config.speculative_config)
