"""The torch reference attention backend: plain torch ops, on CPU and CUDA.

Decodes are batched in small length-sorted groups; prefill chunks run one by one. What
the groups need (rows, blocks, additive masks) is planned once per step in ``prepare``
and reused by every layer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from llmkit.model.attention import paged_decode_cpu
from llmkit.model.attention.base import AttentionBackend, AttentionMetadata, AttentionSpec

# Measured on a 2-core CPU (64 decodes, contexts 16..512): 8 per group costs a quarter
# of one padded batch; larger groups spill the gathered K/V out of cache.
_DECODE_GROUP = 8
# Queries per matmul in a prefill chunk's attention: scores of [heads, 128, context] stay in
# cache; 128 and 256 measured alike, 1150 (all at once) 3x slower on a 1150-token prompt.
_QUERY_CHUNK = 128
# Plans kept: a step's KV cache groups' and their parts'; more are earlier steps'.
_KEPT_PLANS = 16


@dataclass
class _DecodeGroup:
    rows: torch.Tensor  # [R] query rows
    blocks: torch.Tensor  # [R * width] physical blocks, row-major
    mask: torch.Tensor  # [R, 1, 1, max_len] additive: 0 in context, -inf beyond
    width: int  # blocks per request, padded
    max_len: int
    seq_lens: torch.Tensor  # [R, 1]
    windowed: dict[int, torch.Tensor] = field(default_factory=dict)  # window -> its mask

    def mask_for(self, window: int | None) -> torch.Tensor:
        """The additive key mask of a layer with ``window`` (made once per step)."""
        if window is None:
            return self.mask
        if window not in self.windowed:
            keys = torch.arange(self.max_len, device=self.mask.device)[None, :]
            early = (keys < self.seq_lens - window)[:, None, None, :]
            self.windowed[window] = self.mask.masked_fill(early, float("-inf"))
        return self.windowed[window]


@dataclass
class _TorchPlan:
    """One step's decode groups and prefills, for the metadata, block size and dtype it fits."""

    meta: AttentionMetadata
    block_size: int
    dtype: torch.dtype
    decode_groups: list[_DecodeGroup]
    prefills: list[int]  # requests attended one by one
    kernel_decodes: tuple[torch.Tensor, torch.Tensor] | None  # (requests, rows) for the kernel

    @classmethod
    def make(
        cls, meta: AttentionMetadata, block_size: int, dtype: torch.dtype, kernel: bool = False
    ) -> _TorchPlan:
        starts, lens = meta.query_start_loc_host, meta.seq_lens_host
        q_lens = [starts[i + 1] - starts[i] for i in range(meta.num_reqs)]
        decodes = sorted((i for i, n in enumerate(q_lens) if n == 1), key=lens.__getitem__)
        kernel_decodes, groups = None, []
        if kernel and decodes:  # the kernel takes every decode, one or many
            reqs = torch.tensor(decodes, dtype=torch.int64)
            kernel_decodes = (reqs, meta.query_start_loc[reqs].long())
        elif len(decodes) > 1:
            groups = [
                _decode_group(meta, decodes[g : g + _DECODE_GROUP], block_size, dtype)
                for g in range(0, len(decodes), _DECODE_GROUP)
            ]
        else:  # a lone decode is attended like a prefill chunk
            decodes = []
        batched = set(decodes)
        prefills = [i for i in range(meta.num_reqs) if q_lens[i] > 0 and i not in batched]
        return cls(meta, block_size, dtype, groups, prefills, kernel_decodes)

    def fits(self, meta: AttentionMetadata, block_size: int, dtype: torch.dtype) -> bool:
        return self.meta is meta and self.block_size == block_size and self.dtype == dtype


class TorchAttentionBackend(AttentionBackend):
    """The reference: plain torch ops. Decodes are batched; prefill chunks run one by one.

    With ``decode_kernel`` (the default), float32 decodes on CPU go to the C kernel of
    :mod:`paged_decode_cpu` where it builds, reading K/V from the cache without copies.
    """

    name = "torch"

    def __init__(self, decode_kernel: bool = True) -> None:
        # The step's plans by metadata: one per KV cache group (model/kv_layout.py). A plan
        # holds its metadata, so an id here names no other while the plan is kept.
        self._plans: dict[int, _TorchPlan] = {}
        # Built (or found built) here, at start-up, rather than in a request's first step.
        self.decode_kernel = decode_kernel and paged_decode_cpu.load() is not None

    def _make_plan(
        self, meta: AttentionMetadata, block_size: int, dtype: torch.dtype
    ) -> _TorchPlan:
        kernel = (
            self.decode_kernel
            and meta.query_start_loc.device.type == "cpu"
            and dtype == torch.float32
        )
        return _TorchPlan.make(meta, block_size, dtype, kernel)

    def prepare(self, meta: AttentionMetadata, block_size: int, dtype: torch.dtype) -> None:
        self._plan_for(meta, block_size, dtype)

    def _plan_for(self, meta: AttentionMetadata, block_size: int, dtype: torch.dtype) -> _TorchPlan:
        plan = self._plans.get(id(meta))
        if plan is None or not plan.fits(meta, block_size, dtype):
            if len(self._plans) >= _KEPT_PLANS:
                self._plans.clear()  # earlier steps'
            plan = self._plans[id(meta)] = self._make_plan(meta, block_size, dtype)
        return plan

    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        num_kv_heads, head_dim = k_cache.shape[-2:]
        if (slot_mapping < 0).any():
            keep = slot_mapping >= 0
            key, value, slot_mapping = key[keep], value[keep], slot_mapping[keep]
        # A cache of another dtype (kv_cache_dtype) takes the rows rounded to it.
        if not k_cache.is_contiguous():  # a view of larger pages (model/kv_layout.py)
            block_size = k_cache.shape[1]
            at = (slot_mapping // block_size, slot_mapping % block_size)
            k_cache[at], v_cache[at] = key.to(k_cache), value.to(v_cache)
            return
        k_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(k_cache))
        v_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(v_cache))

    def forward(
        self,
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        spec: AttentionSpec,
    ) -> torch.Tensor:
        # Planned by prepare(), or here once for the calls after where the backend is used
        # on its own (tests, benchmarks) or on a part of the step (the fused decode's rest).
        plan = self._plan_for(meta, k_cache.shape[1], query.dtype)
        out = torch.empty(query.shape, dtype=query.dtype, device=query.device)  # contiguous
        if plan.kernel_decodes is not None and k_cache.dtype not in paged_decode_cpu.KV_DTYPES:
            raise ValueError(f"the CPU decode kernel reads no {k_cache.dtype} KV cache")
        if plan.kernel_decodes is not None:
            reqs, decode_rows = plan.kernel_decodes
            paged_decode_cpu.paged_decode(
                query.contiguous(),
                k_cache,
                v_cache,
                meta.block_tables,
                meta.seq_lens,
                reqs,
                decode_rows,
                out,
                spec,
            )
        num_kv_heads = k_cache.shape[2]
        for group in plan.decode_groups:
            k, v = (t.to(query.dtype) for t in _gather_padded(k_cache, v_cache, group))
            # The query heads of one KV head are that head's queries: no K/V repeat for GQA
            # (1.1-1.9x faster than SDPA's enable_gqa here).
            q = query[group.rows]
            q = q.view(q.shape[0], num_kv_heads, -1, q.shape[-1])
            mask = group.mask_for(spec.window)
            if spec.plain:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=spec.scale)
            else:
                scores = _scores(q @ k.transpose(-1, -2), spec) + mask
                sinks = None if spec.sinks is None else spec.sinks.view(num_kv_heads, -1)
                o = _softmax(scores, sinks, q.dtype) @ v
            out.index_copy_(0, group.rows, o.flatten(1, 2))
        starts = meta.query_start_loc_host
        for i in plan.prefills:
            rows = slice(starts[i], starts[i + 1])
            k, v = _gather_context(k_cache, v_cache, meta.block_tables[i], meta.seq_lens_host[i])
            k, v = k.to(query.dtype), v.to(query.dtype)
            out[rows] = _attend(query[rows], k, v, spec, causal=starts[i + 1] - starts[i] > 1)
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
    mask = torch.zeros(outside.shape, dtype=dtype, device=device)
    mask.masked_fill_(outside, float("-inf"))
    return _DecodeGroup(
        rows=meta.query_start_loc[idx].long(),
        blocks=meta.block_tables[idx, :width].reshape(-1).long(),
        mask=mask[:, None, None, :],
        width=width,
        max_len=max_len,
        seq_lens=meta.seq_lens[idx][:, None],
    )


def _gather_padded(
    k_cache: torch.Tensor, v_cache: torch.Tensor, group: _DecodeGroup
) -> tuple[torch.Tensor, torch.Tensor]:
    """K/V of a decode group, padded to its longest context: ``[R, H_kv, max_len, D]``."""
    num_blocks, block_size = k_cache.shape[:2]
    num_rows = group.rows.shape[0]

    def gather(cache: torch.Tensor) -> torch.Tensor:
        rows = cache.view(num_blocks, -1).index_select(0, group.blocks)
        padded = rows.view(num_rows, group.width * block_size, *cache.shape[2:])
        return padded[:, : group.max_len].transpose(1, 2)

    return gather(k_cache), gather(v_cache)


def _gather_context(
    k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, seq_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``seq_len`` K/V rows of one request: ``[seq_len, H_kv, D]``."""
    block_size = k_cache.shape[1]
    blocks = block_table[: -(-seq_len // block_size)].long()
    k = k_cache[blocks].flatten(0, 1)[:seq_len]
    v = v_cache[blocks].flatten(0, 1)[:seq_len]
    return k, v


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: AttentionSpec, causal: bool
) -> torch.Tensor:
    """``q`` ``[Q, H_q, D]`` are the last Q positions of ``k``/``v`` ``[L, H_kv, D]``.

    Plain batched matmuls over ``_QUERY_CHUNK`` queries at a time, each against only the
    keys its queries see (up to the last one's position; from the first one's window): a
    causal prefill does half the work of a full one, a windowed one only its window, and
    the scores stay small. The query heads that share a KV head are stacked into one
    matmul, so GQA copies no K/V. On a 2-core CPU this is 1.5-4.5x faster than SDPA's flash
    kernel (which computes the masked half too) from 200 to 4000 tokens.
    """
    q_len, num_heads, head_dim = q.shape
    ctx_len, num_kv_heads = k.shape[:2]
    group = num_heads // num_kv_heads
    keys = k.permute(1, 2, 0)  # [H_kv, D, L]
    values = v.transpose(0, 1)  # [H_kv, L, D]
    # Scaled once here, not every chunk's scores: D numbers a query, not one a key.
    queries = (q * spec.scale).view(q_len, num_kv_heads, group, head_dim).permute(1, 2, 0, 3)
    out = q.new_empty(q_len, num_kv_heads, group, head_dim)
    for start in range(0, q_len, _QUERY_CHUNK):
        end = min(q_len, start + _QUERY_CHUNK)
        rows = end - start
        first = ctx_len - q_len + start  # the chunk's first query's position
        seen = first + rows if causal else ctx_len  # keys the chunk's last query sees
        lo = 0 if spec.window is None else max(0, first - spec.window + 1)
        chunk = queries[:, :, start:end].reshape(num_kv_heads, group * rows, head_dim)
        scores = torch.bmm(chunk, keys[:, :, lo:seen]).view(num_kv_heads, group, rows, -1)
        scores = _softcap(scores, spec)
        if spec.window is not None:
            scores += _window_mask(first, rows, lo, seen, spec.window, causal, scores)
        elif causal:  # the chunk's own keys: query i sees key j <= i
            scores[..., seen - rows :] += _future_mask(rows, scores.dtype, scores.device)
        sinks = None if spec.sinks is None else spec.sinks.view(num_kv_heads, group, 1)
        probs = _softmax(scores, sinks, q.dtype)
        o = torch.bmm(probs.view(num_kv_heads, group * rows, -1), values[:, lo:seen])
        out[start:end] = o.view(num_kv_heads, group, rows, head_dim).permute(2, 0, 1, 3)
    return out.view(q_len, num_heads, head_dim)


def _scores(scores: torch.Tensor, spec: AttentionSpec) -> torch.Tensor:
    """Raw dot products -> the logits the softmax takes: scaled, soft-capped (in place)."""
    return _softcap(scores.mul_(spec.scale), spec)


def _softcap(scores: torch.Tensor, spec: AttentionSpec) -> torch.Tensor:
    """Scaled dot products, soft-capped where the spec says (in place)."""
    if spec.softcap is not None:
        scores.div_(spec.softcap).tanh_().mul_(spec.softcap)
    return scores


def _softmax(scores: torch.Tensor, sinks: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """Softmax over keys (the last dim) in float32; with ``sinks`` (each head's sink logit,
    shaped to broadcast against ``scores`` less its key dim), the sink takes its share and
    is dropped."""
    scores = scores.float()
    if sinks is None:
        return scores.softmax(-1).to(dtype)
    sinks = sinks.float().unsqueeze(-1).expand(*scores.shape[:-1], 1)
    return torch.cat([scores, sinks], dim=-1).softmax(-1)[..., :-1].to(dtype)


def _window_mask(
    first: int, rows: int, lo: int, seen: int, window: int, causal: bool, like: torch.Tensor
) -> torch.Tensor:
    """``[rows, seen - lo]`` additive: ``-inf`` where key ``lo + j`` is outside query
    ``first + i``'s window, or after it (``causal``)."""
    device = like.device
    queries = torch.arange(first, first + rows, device=device)[:, None]
    keys = torch.arange(lo, seen, device=device)[None, :]
    hidden = queries - keys >= window
    if causal:
        hidden |= keys > queries
    mask = torch.zeros(hidden.shape, dtype=like.dtype, device=device)
    return mask.masked_fill_(hidden, float("-inf"))


@functools.cache
def _future_mask(size: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``[size, size]`` additive: ``-inf`` where the key comes after the query."""
    return torch.full((size, size), float("-inf"), dtype=dtype, device=device).triu(1)
