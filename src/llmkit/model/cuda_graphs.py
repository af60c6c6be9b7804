"""CUDA graphs for decode-only steps: one replay instead of hundreds of kernel launches.

Measured on an H100 (benchmarks/RESULTS.md, issue 16): a decode step of the ~0.5B model
launches ~15 kernels per layer, and the host spent ~1 ms per layer issuing them while the
GPU ran for ~0.1 ms, so the GPU sat idle ~92% of the time. A graph per batch size, captured
at start-up, replays the whole forward with one launch.

A step whose every request decodes one token, with no more requests than the largest
graph, is padded to the nearest captured size: padded rows have context length 0 (no key
is read) and slot -1 (no KV is written), so they compute nothing anyone reads. The
inputs live in static buffers the graphs were captured on; each step copies its own
values in. The split-KV count of each graph is chosen for ``max_model_len``: the kernel
divides each request's actual keys among the splits at run time, so shorter contexts
stay correct and only the merge pass is spent on empty splits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from llmkit.model.attention import AttentionMetadata
from llmkit.model.batch import StepBatch
from llmkit.model.context import ForwardContext
from llmkit.model.transfer import Staging, scatter_in_flight

# Padding a step to the next size costs little next to the launches a graph saves.
CAPTURE_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 512)

Forward = Callable[[torch.Tensor, ForwardContext], torch.Tensor]


@dataclass
class _Inputs:
    """The static tensors every graph reads, sized for the largest one."""

    input_ids: torch.Tensor  # [N] int64
    positions: torch.Tensor  # [N] int64
    slot_mapping: torch.Tensor  # [N] int64
    seq_lens: torch.Tensor  # [N] int32
    query_start_loc: torch.Tensor  # [N + 1] int32: 0, 1, 2, ... (one token per request)
    block_tables: torch.Tensor  # [N, max_blocks_per_seq] int32


class DecodeGraphs:
    """Captured decode forwards for batch sizes up to ``max_batch``.

    ``context`` builds a layer context for metadata; ``forward`` is the model's forward.
    """

    def __init__(
        self,
        forward: Forward,
        context: Callable[[torch.Tensor, AttentionMetadata], ForwardContext],
        *,
        max_batch: int,
        max_model_len: int,
        block_size: int,
        device: torch.device,
    ) -> None:
        top = min(max_batch, CAPTURE_SIZES[-1])  # larger decode steps run eagerly
        self.sizes = [s for s in CAPTURE_SIZES if s < top] + [top]
        self.max_model_len = max_model_len
        n, width = self.sizes[-1], -(-max_model_len // block_size)
        i32, i64 = torch.int32, torch.int64
        self.inputs = _Inputs(
            input_ids=torch.zeros(n, dtype=i64, device=device),
            positions=torch.zeros(n, dtype=i64, device=device),
            slot_mapping=torch.full((n,), -1, dtype=i64, device=device),
            seq_lens=torch.zeros(n, dtype=i32, device=device),
            query_start_loc=torch.arange(n + 1, dtype=i32, device=device),
            block_tables=torch.zeros(n, width, dtype=i32, device=device),
        )
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._pool = torch.cuda.graph_pool_handle()
        # Largest first: the smaller graphs then fit in the memory the first one pooled.
        for size in reversed(self.sizes):
            self.graphs[size] = self._capture(size, forward, context)

    def _capture(
        self,
        size: int,
        forward: Forward,
        context: Callable[[torch.Tensor, AttentionMetadata], ForwardContext],
    ) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        x = self.inputs
        meta = AttentionMetadata(
            query_start_loc=x.query_start_loc[: size + 1],
            seq_lens=x.seq_lens[:size],
            block_tables=x.block_tables[:size],
            slot_mapping=x.slot_mapping[:size],
            max_query_len=1,
            max_seq_len=self.max_model_len,  # picks the split count: see the module doc
            query_start_loc_host=list(range(size + 1)),
            seq_lens_host=[self.max_model_len] * size,
        )
        ctx = context(x.positions[:size], meta)
        ids = x.input_ids[:size]
        forward(ids, ctx)  # compiles every kernel variant outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = forward(ids, ctx)
        return graph, out

    def size_for(self, num_reqs: int) -> int | None:
        """The captured size a decode step of ``num_reqs`` requests pads to, if any."""
        return next((s for s in self.sizes if s >= num_reqs), None)

    def replay(
        self, size: int, batch: StepBatch, in_flight: torch.Tensor | None, staging: Staging
    ) -> torch.Tensor:
        """Run the step's decodes through graph ``size``; returns hidden rows ``[B, hidden]``,
        a view of the graph's output that the next replay overwrites. The inputs reach the
        static buffers in the stream's order, so the host never waits for the GPU here."""
        x, n = self.inputs, len(batch.input_ids)
        zeros = [0] * (size - n)
        longs = staging.to_device(
            [
                batch.input_ids + zeros,
                batch.positions + zeros,
                batch.slot_mapping + [-1] * (size - n),
            ],
            torch.int64,
        )
        x.input_ids[:size].copy_(longs[0])
        x.positions[:size].copy_(longs[1])
        x.slot_mapping[:size].copy_(longs[2])
        x.seq_lens[:size].copy_(staging.to_device(batch.seq_lens + zeros, torch.int32))
        width = len(batch.block_tables[0])
        x.block_tables[:n, :width].copy_(staging.to_device(batch.block_tables, torch.int32))
        scatter_in_flight(x.input_ids, batch.in_flight, in_flight, staging)
        graph, out = self.graphs[size]
        graph.replay()
        return out[:n]
