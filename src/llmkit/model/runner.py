"""ModelRunner: owns the model and the paged KV cache; turns a step into one flat batch."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from llmkit.config import EngineConfig
from llmkit.model.attention import AttentionMetadata, create_backend
from llmkit.model.context import ForwardContext
from llmkit.model.loader import load_model
from llmkit.model.lora import LoRAModel
from llmkit.model.lora_adapter import LoRAAdapter

if TYPE_CHECKING:
    from transformers import PretrainedConfig

logger = logging.getLogger(__name__)


@dataclass
class SeqInput:
    """One request's share of a step: ``token_ids`` from position ``start``, KV in ``block_ids``."""

    token_ids: list[int]
    start: int
    block_ids: list[int]
    lora: LoRAAdapter | None = None


def resolve_device(config: EngineConfig) -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but no CUDA device is available")
    return torch.device(config.device)


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


class ModelRunner:
    def __init__(
        self, config: EngineConfig, model_path: str, hf_config: PretrainedConfig, max_model_len: int
    ):
        self.config = config
        self.device = resolve_device(config)
        self.dtype = resolve_dtype(config, hf_config, self.device)
        self.block_size = config.block_size
        self.model = load_model(model_path, hf_config, self.dtype, self.device)
        self.lora = (
            LoRAModel(self.model, config.max_loras, config.max_lora_rank)
            if config.enable_lora
            else None
        )
        backend = config.attention_backend
        if backend == "auto":
            backend = "triton" if self.device.type == "cuda" else "torch"
        self.backend = create_backend(backend)
        # An encoder attends over each whole input in one step and keeps nothing between steps.
        self.is_encoder = bool(getattr(self.model, "is_encoder", False))
        self.num_blocks = 0 if self.is_encoder else self._num_kv_blocks(max_model_len)
        shape = (self.num_blocks, self.block_size, self.model.num_kv_heads, self.model.head_dim)
        # Zeroed, not empty: padded reads in attention multiply masked slots by zero weight,
        # and 0 * NaN from stale memory would poison them.
        self.kv_caches = [
            (
                torch.zeros(shape, dtype=self.dtype, device=self.device),
                torch.zeros(shape, dtype=self.dtype, device=self.device),
            )
            for _ in range(0 if self.is_encoder else self.model.num_layers)
        ]
        logger.info(
            "model on %s in %s, %s attention, %d KV blocks of %d tokens",
            self.device,
            self.dtype,
            self.backend.name,
            self.num_blocks,
            self.block_size,
        )

    def _block_bytes(self) -> int:
        m = self.model
        elem = torch.empty((), dtype=self.dtype).element_size()
        return 2 * m.num_layers * self.block_size * m.num_kv_heads * m.head_dim * elem

    def _num_kv_blocks(self, max_model_len: int) -> int:
        if self.config.num_kv_blocks is not None:
            return self.config.num_kv_blocks
        per_seq = -(-max_model_len // self.block_size)
        if self.device.type == "cuda":
            free, total = torch.cuda.mem_get_info(self.device)
            used = total - free
            budget = self.config.gpu_memory_utilization * total - used
            # Room for activations of the largest step.
            budget -= 256 * 1024 * 1024
            blocks = int(budget // self._block_bytes())
        else:
            blocks = int(self.config.cpu_kv_cache_gib * (1 << 30) // self._block_bytes())
            # More than every sequence at full length can ever use is wasted memory.
            blocks = min(blocks, per_seq * self.config.max_num_seqs)
        if blocks < per_seq:
            raise ValueError(
                f"the KV cache holds {blocks} blocks of {self.block_size} tokens, fewer than one "
                f"sequence of max_model_len={max_model_len} needs ({per_seq}); raise the "
                "memory budget or lower max_model_len"
            )
        return blocks

    @torch.inference_mode()
    def execute(self, seqs: list[SeqInput]) -> torch.Tensor:
        """Run the model over the step's tokens; returns hidden states ``[T, hidden]``."""
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        starts = [0]
        seq_lens: list[int] = []
        bs = self.block_size
        for seq in seqs:
            n = len(seq.token_ids)
            input_ids += seq.token_ids
            pos = range(seq.start, seq.start + n)
            positions += pos
            blocks = seq.block_ids
            if blocks:
                slots += [blocks[p // bs] * bs + p % bs for p in pos]
            starts.append(starts[-1] + n)
            seq_lens.append(seq.start + n)
        width = max(len(s.block_ids) for s in seqs)  # 0 for an encoder, which has no blocks
        tables = [s.block_ids + [0] * (width - len(s.block_ids)) for s in seqs]
        dev = self.device
        meta = AttentionMetadata(
            query_start_loc=torch.tensor(starts, dtype=torch.int32, device=dev),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev),
            block_tables=torch.tensor(tables, dtype=torch.int32, device=dev),
            slot_mapping=torch.tensor(slots, dtype=torch.int64, device=dev),
            max_query_len=max(starts[i + 1] - starts[i] for i in range(len(seqs))),
            max_seq_len=max(seq_lens),
            query_start_loc_host=starts,
            seq_lens_host=seq_lens,
        )
        self.backend.prepare(meta, self.block_size, self.dtype)
        if self.lora is not None:
            self.lora.prepare([s.lora for s in seqs], [len(s.token_ids) for s in seqs])
        ctx = ForwardContext(
            positions=torch.tensor(positions, dtype=torch.int64, device=dev),
            meta=meta,
            backend=self.backend,
            kv_caches=self.kv_caches,
        )
        return self.model(torch.tensor(input_ids, dtype=torch.int64, device=dev), ctx)

    @torch.inference_mode()
    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        compute = getattr(self.model, "compute_logits", None)
        if compute is None:
            raise TypeError("an encoder-only model has no logits")
        return compute(hidden).float()
