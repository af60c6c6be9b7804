"""Attention backends behind one interface: the torch reference (CPU and CUDA) and Triton.

The KV cache of one layer is a pair of tensors shaped ``[num_blocks, block_size,
num_kv_heads, head_dim]``. A step's tokens are one flattened, unpadded batch; request
``i`` owns query rows ``query_start_loc[i]:query_start_loc[i+1]``, which are the last
``q_len`` positions of its ``seq_lens[i]`` tokens of context, read through
``block_tables[i]``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class AttentionMetadata:
    """The step's batch layout, built once per step by the runner and shared by all layers."""

    query_start_loc: torch.Tensor  # [B + 1] int32
    seq_lens: torch.Tensor  # [B] int32, context length including this step's tokens
    block_tables: torch.Tensor  # [B, max_blocks] int32
    slot_mapping: torch.Tensor  # [T] int64, -1 for tokens that write no KV
    max_query_len: int
    max_seq_len: int
    # Host copies, so backends that loop on the host never sync with the device.
    query_start_loc_host: list[int]
    seq_lens_host: list[int]

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens_host)


class AttentionBackend(ABC):
    """Writes a step's K/V into the paged cache and computes causal attention through it."""

    name: str

    @abstractmethod
    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        """Store ``key``/``value`` ``[T, H_kv, D]`` at ``slot_mapping`` (``-1`` is skipped)."""

    @abstractmethod
    def forward(
        self,
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        scale: float,
    ) -> torch.Tensor:
        """Causal paged attention for ``query`` ``[T, H_q, D]``; returns ``[T, H_q, D]``."""


class TorchAttentionBackend(AttentionBackend):
    """The reference: plain torch ops. Decodes are batched; prefill chunks run one by one."""

    name = "torch"

    def write_kv(self, key, value, k_cache, v_cache, slot_mapping):
        num_kv_heads, head_dim = k_cache.shape[-2:]
        if (slot_mapping < 0).any():
            keep = slot_mapping >= 0
            key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
        k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key)
        v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value)

    def forward(self, query, k_cache, v_cache, meta, scale):
        out = torch.empty_like(query)
        starts = meta.query_start_loc_host
        q_lens = [starts[i + 1] - starts[i] for i in range(meta.num_reqs)]
        decodes = [i for i, n in enumerate(q_lens) if n == 1]
        if len(decodes) > 1:
            self._decode_batch(query, k_cache, v_cache, meta, scale, decodes, out)
        else:
            decodes = []
        done = set(decodes)
        for i in range(meta.num_reqs):
            if i in done or q_lens[i] == 0:
                continue
            rows = slice(starts[i], starts[i + 1])
            k, v = _gather_context(k_cache, v_cache, meta.block_tables[i], meta.seq_lens_host[i])
            out[rows] = _attend(query[rows], k, v, scale, causal=q_lens[i] > 1)
        return out

    def _decode_batch(self, query, k_cache, v_cache, meta, scale, reqs, out):
        """Masked attention over single-token requests, in groups of similar context length.

        Gathering K/V out of the paged cache is what costs on a CPU; grouping by length
        keeps padding small and each group's gathered K/V small enough to stay in cache.
        """
        lens = meta.seq_lens_host
        reqs = sorted(reqs, key=lambda i: lens[i])
        for g in range(0, len(reqs), _DECODE_GROUP):
            group = reqs[g : g + _DECODE_GROUP]
            idx = torch.tensor(group, device=query.device)
            rows = meta.query_start_loc[idx].long()
            max_len = lens[group[-1]]
            k, v = _gather_padded(k_cache, v_cache, meta.block_tables[idx], max_len)
            mask = torch.arange(max_len, device=query.device)[None, :] < meta.seq_lens[idx][:, None]
            o = F.scaled_dot_product_attention(
                query[rows].unsqueeze(2), k, v, attn_mask=mask[:, None, None, :],
                scale=scale, enable_gqa=True,
            )
            out.index_copy_(0, rows, o.squeeze(2))


# Measured on a 2-core CPU (64 decodes, contexts 16..512): 8 per group costs a quarter
# of one padded batch; larger groups spill the gathered K/V out of cache.
_DECODE_GROUP = 8


def _gather_padded(k_cache, v_cache, block_tables, max_len):
    """K/V of several requests, padded to ``max_len``: ``[R, H_kv, max_len, D]`` each."""
    num_blocks, block_size = k_cache.shape[:2]
    R = block_tables.shape[0]
    width = -(-max_len // block_size)
    flat = block_tables[:, :width].reshape(-1).long()

    def gather(cache):
        rows = cache.view(num_blocks, -1).index_select(0, flat)
        return rows.view(R, width * block_size, *cache.shape[2:])[:, :max_len].transpose(1, 2)

    return gather(k_cache), gather(v_cache)


def _gather_context(k_cache, v_cache, block_table, seq_len):
    block_size = k_cache.shape[1]
    blocks = block_table[: -(-seq_len // block_size)].long()
    k = k_cache[blocks].flatten(0, 1)[:seq_len]
    v = v_cache[blocks].flatten(0, 1)[:seq_len]
    return k, v


def _attend(q, k, v, scale, causal):
    """``q`` ``[Q, H_q, D]`` are the last Q positions of ``k``/``v`` ``[L, H_kv, D]``."""
    q_len, ctx_len = q.shape[0], k.shape[0]
    mask = None
    if causal:
        q_pos = torch.arange(ctx_len - q_len, ctx_len, device=q.device)
        mask = torch.arange(ctx_len, device=q.device)[None, :] <= q_pos[:, None]
    o = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
        attn_mask=mask, scale=scale, enable_gqa=True,
    )
    return o.transpose(0, 1)


def create_backend(name: str) -> AttentionBackend:
    """The backend called ``name``: ``"torch"`` or ``"triton"``."""
    if name == "torch":
        return TorchAttentionBackend()
    if name == "triton":
        from llmkit.model.triton_attention import TritonAttentionBackend

        return TritonAttentionBackend()
    raise ValueError(f"attention_backend must be 'auto', 'torch' or 'triton', got {name!r}")
