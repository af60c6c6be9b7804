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
from typing import Any

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
    # What a backend derives from this metadata on its first layer, for the others.
    plan: Any = None

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


@dataclass
class _DecodeGroup:
    rows: torch.Tensor  # [R] query rows
    blocks: torch.Tensor  # [R * width] physical blocks, row-major
    mask: torch.Tensor  # [R, 1, 1, max_len] additive: 0 in context, -inf beyond
    width: int  # blocks per request, padded
    max_len: int


@dataclass
class _TorchPlan:
    decode_groups: list[_DecodeGroup]
    prefills: list[int]  # requests attended one by one


class TorchAttentionBackend(AttentionBackend):
    """The reference: plain torch ops. Decodes are batched; prefill chunks run one by one."""

    name = "torch"

    @staticmethod
    def _plan(meta: AttentionMetadata, block_size: int, dtype: torch.dtype) -> _TorchPlan:
        """Group the step's decodes once; every layer reuses the groups."""
        starts, lens = meta.query_start_loc_host, meta.seq_lens_host
        q_lens = [starts[i + 1] - starts[i] for i in range(meta.num_reqs)]
        decodes = sorted((i for i, n in enumerate(q_lens) if n == 1), key=lens.__getitem__)
        if len(decodes) < 2:
            decodes = []
        groups = [
            _decode_group(meta, decodes[g : g + _DECODE_GROUP], block_size, dtype)
            for g in range(0, len(decodes), _DECODE_GROUP)
        ]
        in_groups = set(decodes)
        prefills = [i for i in range(meta.num_reqs) if q_lens[i] > 0 and i not in in_groups]
        return _TorchPlan(groups, prefills)

    def write_kv(self, key, value, k_cache, v_cache, slot_mapping):
        num_kv_heads, head_dim = k_cache.shape[-2:]
        if (slot_mapping < 0).any():
            keep = slot_mapping >= 0
            key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
        k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key)
        v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value)

    def forward(self, query, k_cache, v_cache, meta, scale):
        if meta.plan is None:
            meta.plan = self._plan(meta, k_cache.shape[1], query.dtype)
        plan: _TorchPlan = meta.plan
        out = torch.empty_like(query)
        for group in plan.decode_groups:
            k, v = _gather_padded(k_cache, v_cache, group)
            o = F.scaled_dot_product_attention(
                query[group.rows].unsqueeze(2), k, v, attn_mask=group.mask,
                scale=scale, enable_gqa=True,
            )
            out.index_copy_(0, group.rows, o.squeeze(2))
        starts = meta.query_start_loc_host
        for i in plan.prefills:
            rows = slice(starts[i], starts[i + 1])
            k, v = _gather_context(k_cache, v_cache, meta.block_tables[i], meta.seq_lens_host[i])
            out[rows] = _attend(query[rows], k, v, scale, causal=starts[i + 1] - starts[i] > 1)
        return out


def _decode_group(
    meta: AttentionMetadata, reqs: list[int], block_size: int, dtype: torch.dtype
) -> _DecodeGroup:
    """A group's rows, blocks and key mask; the same for every layer of the step."""
    device = meta.query_start_loc.device
    idx = torch.tensor(reqs, device=device)
    max_len = meta.seq_lens_host[reqs[-1]]
    width = -(-max_len // block_size)
    outside = torch.arange(max_len, device=device)[None, :] >= meta.seq_lens[idx][:, None]
    # Additive, not boolean: SDPA would convert a boolean mask again in every layer.
    mask = torch.zeros(outside.shape, dtype=dtype, device=device).masked_fill_(outside, float("-inf"))
    return _DecodeGroup(
        rows=meta.query_start_loc[idx].long(),
        blocks=meta.block_tables[idx, :width].reshape(-1).long(),
        mask=mask[:, None, None, :],
        width=width,
        max_len=max_len,
    )


# Measured on a 2-core CPU (64 decodes, contexts 16..512): 8 per group costs a quarter
# of one padded batch; larger groups spill the gathered K/V out of cache.
_DECODE_GROUP = 8


def _gather_padded(k_cache, v_cache, group: _DecodeGroup):
    """K/V of a decode group, padded to its longest context: ``[R, H_kv, max_len, D]``."""
    num_blocks, block_size = k_cache.shape[:2]
    R = group.rows.shape[0]

    def gather(cache):
        rows = cache.view(num_blocks, -1).index_select(0, group.blocks)
        padded = rows.view(R, group.width * block_size, *cache.shape[2:])
        return padded[:, : group.max_len].transpose(1, 2)

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
