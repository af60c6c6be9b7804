"""The value types an engine reports to its callers, over any transport: EngineStats (its
load and counters) and ModelInfo (what it serves). Plain dataclasses, no torch: the core
builds them, clients, servers and the model manager hold them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Task = Literal["generate", "embed"]


@dataclass(frozen=True)
class ModelInfo:
    """What a client needs to know of the served model to check and tokenize input."""

    name: str  # the model as configured (a directory, or "demo")
    tokenizer: str  # the tokenizer's directory, loadable with transformers
    task: Task  # what this engine serves
    max_model_len: int
    vocab_size: int
    hidden_size: int
    max_logprobs: int
    is_encoder: bool  # an embedding-only encoder (BERT), which cannot generate
    # Images (LLaVA): the placeholder token, the embeddings one image becomes, the directory
    # of its image processor, and the most images a prompt may hold. None/0: text only.
    image_token_id: int | None = None
    image_tokens: int = 0
    image_processor: str | None = None
    max_images_per_prompt: int = 0
    # The model class, and what a mixture of experts or a windowed model is made of.
    architecture: str = ""
    num_experts: int = 0  # 0: dense
    experts_per_token: int = 0
    sliding_window: int | None = None  # None: no layer is windowed

    @property
    def supports_images(self) -> bool:
        return self.image_token_id is not None

    def too_many_images(self, count: int) -> str | None:
        """Why a prompt may not hold ``count`` images (the limit, or the context they would
        fill), or None if it may."""
        if count > self.max_images_per_prompt:
            return (
                f"the prompt holds {count} images, more than limit_mm_per_prompt allows "
                f"({{'image': {self.max_images_per_prompt}}})"
            )
        if count * self.image_tokens > self.max_model_len:
            return (
                f"the prompt's {count} images take {count * self.image_tokens} tokens "
                f"({self.image_tokens} each), more than max_model_len={self.max_model_len}"
            )
        return None

    @property
    def supports_generate(self) -> bool:
        return self.task == "generate"

    @property
    def supports_embed(self) -> bool:
        return self.task == "embed"


@dataclass(frozen=True)
class EngineStats:
    """A snapshot of the engine's load and counters."""

    num_running: int
    num_waiting: int
    kv_blocks_total: int
    kv_blocks_free: int
    prefix_cache_hit_rate: float
    generated_tokens: int
    prompt_tokens: int
    steps: int
    num_preemptions: int
    # Admission: requests (and their prompt tokens) admitted but not yet run, the limits,
    # and how long requests waited for their first step (see engine/admission.py).
    num_queued: int = 0
    queued_tokens: int = 0
    max_queued_requests: int | None = None
    max_queued_tokens: int | None = None
    queue_wait_count: int = 0
    queue_wait_sum: float = 0.0
    queue_wait_buckets: tuple[int, ...] = field(default_factory=tuple)
    # Speculative decoding's totals: checked steps, proposed, accepted and emitted tokens.
    spec_num_drafts: int = 0
    spec_num_draft_tokens: int = 0
    spec_num_accepted_tokens: int = 0
    spec_num_emitted_tokens: int = 0
    # The prompt cache: prompt tokens a lookup asked of each tier (what the tiers above
    # lacked) and found there; this model's bytes in the tiers below the KV pool; and the
    # prefill time its hits saved, estimated at the engine's measured prompt speed.
    prompt_cache_pool_queried_tokens: int = 0
    prompt_cache_pool_hit_tokens: int = 0
    prompt_cache_host_queried_tokens: int = 0
    prompt_cache_host_hit_tokens: int = 0
    prompt_cache_disk_queried_tokens: int = 0
    prompt_cache_disk_hit_tokens: int = 0
    prompt_cache_host_bytes: int = 0
    prompt_cache_disk_bytes: int = 0
    prompt_cache_saved_seconds: float = 0.0

    @classmethod
    def merge(cls, snapshots: Sequence[EngineStats]) -> EngineStats:
        """One snapshot for several engines (replicas, a manager's models): counts and totals
        add up, the prefix cache's hit rate is weighted by prompt tokens, the queue-wait
        histograms add bucket by bucket, and a queue limit is the sum of the limits (None
        where any engine has none)."""
        fields: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            values = [getattr(s, f.name) for s in snapshots]
            if f.name == "prefix_cache_hit_rate":
                weights = [s.prompt_tokens for s in snapshots]
                total = sum(weights)
                fields[f.name] = (
                    sum(v * w for v, w in zip(values, weights)) / total if total else 0.0
                )
            elif f.name == "queue_wait_buckets":
                fields[f.name] = tuple(sum(b) for b in zip(*values)) if values else ()
            elif f.name.startswith("max_queued"):
                fields[f.name] = None if not values or None in values else sum(values)
            else:
                fields[f.name] = sum(values)
        return cls(**fields)
