"""ModelRunner: owns the model and the paged KV cache; turns a step into one flat batch."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from llmkit.config import EngineConfig
from llmkit.model.attention import AttentionMetadata, create_backend
from llmkit.model.batch import SeqInput, StepBatch, flatten
from llmkit.model.context import ForwardContext
from llmkit.model.cpu_kernels import build_cpu_kernels
from llmkit.model.cpu_memory import keep_freed_memory, zeroed
from llmkit.model.cuda_graphs import DecodeGraphs
from llmkit.model.device import resolve_device, resolve_dtype, resolve_kv_dtype
from llmkit.model.gguf.cache import gguf_table
from llmkit.model.gguf.native import default_native, linears_only
from llmkit.model.kv_layout import plan_kv_layout
from llmkit.model.layers.packed import can_pack, pack_linears
from llmkit.model.layers.quant import HEAD_METHODS, quantize_head, quantize_linears
from llmkit.model.layers.rotary import RotaryEmbedding
from llmkit.model.loader import load_model, model_class
from llmkit.model.lora import LoRAModel
from llmkit.model.parallel import SINGLE, TensorParallel
from llmkit.model.recurrent import RecurrentStates
from llmkit.model.transfer import Staging, scatter_in_flight

if TYPE_CHECKING:
    from transformers import PretrainedConfig

logger = logging.getLogger(__name__)


class ModelRunner:
    """With ``tp``, one tensor-parallel rank's: its shard of the model and of the KV cache."""

    def __init__(
        self,
        config: EngineConfig,
        model_path: str,
        hf_config: PretrainedConfig,
        max_model_len: int,
        tp: TensorParallel = SINGLE,
    ):
        self.config = config
        self.device = resolve_device(config)
        self.dtype = resolve_dtype(config, hf_config, self.device)
        self.block_size = config.block_size
        if self.device.type == "cpu" and config.cpu_keep_freed_memory:
            keep_freed_memory()
        if self.device.type == "cpu":
            build_cpu_kernels()
        table = gguf_table(model_path)
        method, group = config.quantization, config.quantization_group_size
        projections = getattr(model_class(hf_config), "projections", {})
        native = (
            default_native(config, table, self.device, tp.size, projections)
            if method is None
            else linears_only(table, method, group, projections)  # a GGUF's Q4 layers as they are
        )
        self.model = load_model(model_path, hf_config, self.dtype, self.device, tp, native)
        for module in cast(nn.Module, self.model).modules():
            if isinstance(module, RotaryEmbedding):
                module.trim(max_model_len)  # positions never reach past the context
        quantized = bool(native.tensors) or method is not None
        self.kv_dtype = resolve_kv_dtype(config, self.dtype, self.device, quantized)
        if method is not None:
            quantize_linears(cast(nn.Module, self.model), method, group)
            if method in HEAD_METHODS and tp.size == 1:
                quantize_head(cast(nn.Module, self.model))
        self.lora = (
            LoRAModel(self.model, config.max_loras, config.max_lora_rank)
            if config.enable_lora
            else None
        )
        if can_pack(self.device, self.dtype):
            pack_linears(cast(nn.Module, self.model))
        backend = config.attention_backend
        if backend == "auto":
            backend = "triton" if self.device.type == "cuda" else "torch"
        self.backend = create_backend(backend)
        # An encoder attends over each whole input in one step and keeps nothing between steps.
        self.is_encoder = bool(getattr(self.model, "is_encoder", False))
        shapes = [] if self.is_encoder else self.model.kv_cache_shapes
        # A window as long as the context is none: its layers need every block anyway.
        windows = [
            w if w is not None and w < max_model_len else None
            for w in getattr(self.model, "kv_cache_windows", [None] * len(shapes))
        ]
        self.kv_layout = plan_kv_layout(shapes, windows, not config.disable_hybrid_kv_cache_manager)
        budget = self._kv_budget()
        # A hybrid's linear-attention states come out of the KV cache's budget first; they
        # bound how many requests run at once.
        self.states = RecurrentStates.for_model(self.model, config, budget, self.device)
        self.max_running = self.states.max_running if self.states else config.max_num_seqs
        budget -= self.states.nbytes if self.states else 0
        # Every rank reads the same block tables, so all must hold as many blocks.
        self.num_blocks = (
            0 if self.is_encoder else tp.min(self._num_kv_blocks(max_model_len, budget))
        )
        # Zeroed, not empty: padded reads in attention multiply masked slots by zero weight,
        # and 0 * NaN from stale memory would poison them. Caches of the same slot in
        # different groups share its pages (a block is one group's at a time); a narrower
        # cache than its slot's widest views the front of each page.
        pages = [
            [
                zeroed((self.num_blocks, self.block_size * size), self.kv_dtype, self.device)
                for _ in "kv"
            ]
            for size in self.kv_layout.slot_sizes
        ]
        self.kv_caches: list[tuple[torch.Tensor, torch.Tensor]] = []
        for slot, (heads, dim) in zip(self.kv_layout.cache_slots, shapes):
            k_pages, v_pages = pages[slot]
            self.kv_caches.append(
                (
                    _cache_view(k_pages, self.block_size, heads, dim),
                    _cache_view(v_pages, self.block_size, heads, dim),
                )
            )
        self.staging = Staging(self.device)
        self.graphs = self._capture_graphs(max_model_len, tp)
        logger.info(
            "model on %s in %s, %s attention, %d KV blocks of %d tokens in %s, %s, %s%s",
            self.device,
            self.dtype,
            self.backend.name,
            self.num_blocks,
            self.block_size,
            self.kv_dtype,
            self.kv_layout.describe(),
            f"CUDA graphs for {self.graphs.sizes}" if self.graphs else "no CUDA graphs",
            f", {self.states.describe()}" if self.states else "",
        )

    def _capture_graphs(self, max_model_len: int, tp: TensorParallel) -> DecodeGraphs | None:
        """Decode graphs where every step's forward is the same kernels on the same buffers:
        CUDA, the Triton backend (the torch one plans on the host), one process, no LoRA
        (its per-step adapter indices), one KV cache group, no recurrent states (a hybrid's
        per-step slot indices), and a decoder."""
        if (
            self.device.type != "cuda"
            or self.config.enforce_eager
            or self.backend.name != "triton"
            or tp.size > 1
            or self.lora is not None
            or self.is_encoder
            or len(self.kv_layout.windows) > 1  # the graphs' inputs hold one block table
            or self.states is not None
        ):
            return None
        with torch.inference_mode():
            return DecodeGraphs(
                self.model,
                self._context,
                max_batch=self.config.max_num_seqs,
                max_model_len=max_model_len,
                block_size=self.block_size,
                device=self.device,
            )

    def _context(
        self,
        positions: torch.Tensor,
        *metas: AttentionMetadata,
        stacked: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> ForwardContext:
        """The layers' context: ``metas``, the step's layout for each KV cache group;
        ``stacked``, their slots and tables staged one after the other."""
        return ForwardContext(
            positions=positions,
            metas=metas,
            backend=self.backend,
            kv_caches=self.kv_caches,
            cache_groups=self.kv_layout.cache_groups,
            stacked=stacked,
        )

    def _block_bytes(self) -> int:
        """The bytes of one block id: one block of each cache in a page."""
        elem = torch.empty((), dtype=self.kv_dtype).element_size()
        per_token = sum(self.kv_layout.slot_sizes)
        return 2 * self.block_size * per_token * elem

    def _kv_budget(self) -> int:
        """The bytes the KV cache (and a hybrid's states) may take."""
        if self.device.type != "cuda":
            return int(self.config.cpu_kv_cache_gib * (1 << 30))
        free, total = torch.cuda.mem_get_info(self.device)
        # Room for activations of the largest step.
        return int(self.config.gpu_memory_utilization * total - (total - free)) - (256 << 20)

    def _num_kv_blocks(self, max_model_len: int, budget: int) -> int:
        if self.config.num_kv_blocks is not None:
            return self.config.num_kv_blocks
        # The engine resolves the step's token budget before it makes the runner.
        chunk = self.config.max_num_batched_tokens or max_model_len
        per_seq = self.kv_layout.blocks_per_sequence(max_model_len, chunk, self.block_size)
        blocks = budget // self._block_bytes()
        if self.device.type != "cuda":
            # More than every sequence at full length can ever use is wasted memory.
            blocks = min(blocks, per_seq * self.max_running)
        if blocks < per_seq:
            raise ValueError(
                f"the KV cache holds {blocks} blocks of {self.block_size} tokens, fewer than one "
                f"sequence of max_model_len={max_model_len} needs ({per_seq}); raise the "
                "memory budget or lower max_model_len"
            )
        return blocks

    def close(self) -> None:
        """Release what the runner started; nothing, in one process."""

    def execute(self, seqs: list[SeqInput], in_flight: torch.Tensor | None = None) -> torch.Tensor:
        """Run the model over the step's tokens; returns hidden states ``[T, hidden]``.
        ``in_flight``: the previous step's sampled tokens, on the device, that the rows
        named by ``in_flight_row`` read."""
        batch = flatten(seqs, self.block_size)
        if self.lora is not None:
            self.lora.prepare([s.lora for s in seqs], [len(s.token_ids) for s in seqs])
        return self.forward(batch, self._image_rows(seqs, batch.query_start_loc), in_flight)

    @torch.inference_mode()
    def forward(
        self,
        batch: StepBatch,
        image_rows: tuple[torch.Tensor, torch.Tensor] | None = None,
        in_flight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``image_rows``: image embeddings that replace placeholder rows (no tensor parallel
        model takes images, so the workers never need them)."""
        self.staging.next_step()
        stage = self.staging.to_device
        starts, seq_lens = batch.query_start_loc, batch.seq_lens
        if image_rows is None and len(batch.input_ids) == len(seq_lens) and self.graphs:
            size = self.graphs.size_for(len(seq_lens))  # all decodes: one token each
            if size is not None:
                return self.graphs.replay(size, batch, in_flight, self.staging)
        tables = stage(batch.block_tables, torch.int32)
        slots = stage(batch.slot_mapping, torch.int64)
        rows, reqs = len(batch.input_ids), len(seq_lens)
        query_start_loc, lens = stage(starts, torch.int32), stage(seq_lens, torch.int32)
        max_query_len = max(starts[i + 1] - starts[i] for i in range(reqs))
        metas = [
            AttentionMetadata(
                query_start_loc=query_start_loc,
                seq_lens=lens,
                block_tables=tables[g * reqs : (g + 1) * reqs],
                slot_mapping=slots[g * rows : (g + 1) * rows],
                max_query_len=max_query_len,
                max_seq_len=max(seq_lens),
                query_start_loc_host=starts,
                seq_lens_host=seq_lens,
            )
            for g in range(batch.groups)
        ]
        for meta in metas:
            self.backend.prepare(meta, self.block_size, self.dtype)
        ctx = self._context(stage(batch.positions, torch.int64), *metas, stacked=(slots, tables))
        if self.states is not None:
            ctx.states = self.states.step(batch.states, self.device)
        ids = stage(batch.input_ids, torch.int64)
        scatter_in_flight(ids, batch.in_flight, in_flight, self.staging)
        if image_rows is None:
            return self.model(ids, ctx)
        return self.model(ids, ctx, image_rows=image_rows)

    def _image_rows(
        self, seqs: list[SeqInput], starts: list[int]
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(flat row of each image embedding, the embeddings), or None in a text-only step."""
        if not any(s.images for s in seqs):
            return None
        rows = [
            torch.arange(len(e), device=self.device) + (first + offset)
            for seq, first in zip(seqs, starts)
            for offset, e in seq.images
        ]
        return torch.cat(rows), torch.cat([e for s in seqs for _, e in s.images])

    @torch.inference_mode()
    def embed_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """``[images, C, H, W]`` -> ``[images, tokens_per_image, hidden]`` (the vision encoder)."""
        embed = getattr(self.model, "embed_images", None)
        if embed is None:
            raise TypeError("this model takes no images")
        images: torch.Tensor = embed(pixel_values.to(self.device, self.dtype))
        return images

    @torch.inference_mode()
    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        compute = getattr(self.model, "compute_logits", None)
        if compute is None:
            raise TypeError("an encoder-only model has no logits")
        return compute(hidden).float()


def _cache_view(page: torch.Tensor, block_size: int, heads: int, dim: int) -> torch.Tensor:
    """A cache ``[blocks, block_size, heads, dim]`` over the front of each of ``page``'s
    rows (its pages, ``block_size`` tokens of its slot's widest cache: all of it when that
    is this one)."""
    return page[:, : block_size * heads * dim].view(page.shape[0], block_size, heads, dim)
