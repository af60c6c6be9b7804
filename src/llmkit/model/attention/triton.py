"""The Triton attention backend: paged KV writes and one unified or split-KV attention launch."""

from __future__ import annotations

import functools

import torch

from llmkit.kernels.paged_attention import paged_attention
from llmkit.kernels.reshape_and_cache import reshape_and_cache
from llmkit.model.attention.base import AttentionBackend, AttentionMetadata, AttentionSpec

# Below this many keys per split, the merge pass and the extra partial writes cost more
# than the parallelism they buy.
MIN_KEYS_PER_SPLIT = 256
MAX_SPLITS = 16


def choose_num_splits(
    *,
    max_query_len: int,
    max_seq_len: int,
    num_reqs: int,
    num_kv_heads: int,
    num_compute_units: int,
    window: int | None = None,
) -> int:
    """How many slices to split each request's keys into, from host-known bounds only.

    Only all-decode batches are split: a prefill tile already has enough work, and the
    partial buffers grow with the token count. A decode batch runs one program per
    (request, KV head); when that leaves the GPU's SMs short of 1.5 waves and contexts
    are long, each program's keys are spread over several (flash decoding). On an H100
    (benchmarks/RESULTS.md), 256 programs over 512 keys ran 10% slower split in two and
    128 programs 13% faster: the merge pass costs a few µs that short contexts don't win back.
    A layer with a sliding ``window`` reads at most that many keys per decode, whatever
    the context, so only those are split.
    """
    if max_query_len != 1:
        return 1
    keys = max_seq_len if window is None else min(max_seq_len, window)
    programs = num_reqs * num_kv_heads
    wanted = -(-3 * num_compute_units // (2 * programs))
    splits = min(MAX_SPLITS, keys // MIN_KEYS_PER_SPLIT, wanted)
    return max(1, splits)


@functools.cache
def compute_units(device: torch.device) -> int:
    """Programs that run at once at full speed: the SM count on CUDA."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    # The interpreter runs programs one after another: splitting only adds work.
    return 1


class TritonAttentionBackend(AttentionBackend):
    """Paged attention in Triton kernels: CUDA, or CPU under ``TRITON_INTERPRET=1``.

    ``num_splits`` fixes the split-KV factor for every batch (tests, benchmarks);
    ``None`` lets :func:`choose_num_splits` pick it per step.
    """

    name = "triton"

    def __init__(self, num_splits: int | None = None) -> None:
        if num_splits is not None and num_splits < 1:
            raise ValueError(f"num_splits must be >= 1, got {num_splits}")
        self.num_splits = num_splits

    def prepare(self, meta: AttentionMetadata, block_size: int, dtype: torch.dtype) -> None:
        """Nothing to plan: the kernels read the metadata as it is, and the split count,
        host arithmetic on the layer's KV head count, is chosen at each launch."""

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        reshape_and_cache(key, value, k_cache, v_cache, slot_mapping)

    def forward(
        self,
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        spec: AttentionSpec,
    ) -> torch.Tensor:
        num_splits = self.num_splits
        if num_splits is None:
            num_splits = choose_num_splits(
                max_query_len=meta.max_query_len,
                max_seq_len=meta.max_seq_len,
                num_reqs=meta.num_reqs,
                num_kv_heads=k_cache.shape[2],
                num_compute_units=compute_units(query.device),
                window=spec.window,
            )
        return paged_attention(
            query,
            k_cache,
            v_cache,
            meta.query_start_loc,
            meta.seq_lens,
            meta.block_tables,
            num_reqs=meta.num_reqs,
            max_query_len=meta.max_query_len,
            scale=spec.scale,
            num_splits=num_splits,
            window=spec.window,
            softcap=spec.softcap,
            sinks=spec.sinks,
        )
