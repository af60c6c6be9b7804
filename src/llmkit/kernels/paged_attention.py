"""Unified causal paged attention over a flattened batch of prefill chunks and decodes.

A layer's sliding window, logit soft-cap and attention sinks are constexpr-gated, so a
plain layer compiles to the kernel it would be without them.

Under the Triton interpreter (CPU tensors, ``TRITON_INTERPRET=1``) every ``tl.dot``
operand is upcast to fp32 first, because the interpreter multiplies bf16 tensors as
their raw ``uint16`` bits; on CUDA the dots run in the cache dtype with fp32 accumulation.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .attention_tiles import tile_config
from .merge_splits import merge_splits
from .runtime import check_launchable

LOG2E = 1.4426950408889634  # the kernel's softmax runs on exp2


@triton.jit
def _find_request(query_start_loc_ptr, num_reqs, tile, BLOCK_Q: tl.constexpr):
    """The request owning query tile ``tile``.

    Request ``i``'s tiles are numbered from ``query_start_loc[i] // BLOCK_Q + i``: the
    ``+ i`` leaves room for each request's partial last tile, so the numbering is
    strictly increasing and the host can size the grid as ``T // BLOCK_Q + num_reqs``
    without reading the lengths. The answer is the last request starting at or before
    ``tile``, found by binary search.
    """
    lo = 0
    hi = num_reqs
    while lo < hi:
        mid = (lo + hi) // 2
        first_tile = tl.load(query_start_loc_ptr + mid) // BLOCK_Q + mid
        at_or_before = first_tile <= tile
        lo = tl.where(at_or_before, mid + 1, lo)
        hi = tl.where(at_or_before, hi, mid)
    return lo - 1


@triton.jit(do_not_specialize=["num_reqs"])
def paged_attention_kernel(
    out_ptr,  # [T, H_q, D], written when NUM_SPLITS == 1
    part_acc_ptr,  # [T, H_q, NUM_SPLITS, D] fp32, written when NUM_SPLITS > 1
    part_max_ptr,  # [T, H_q, NUM_SPLITS] fp32, running max in log2 units
    part_sum_ptr,  # [T, H_q, NUM_SPLITS] fp32, sum of exp2(score - max)
    query_ptr,  # [T, H_q, D]
    k_cache_ptr,  # [num_blocks, BLOCK_SIZE, H_kv, D]
    v_cache_ptr,  # same shape and strides as k_cache
    query_start_loc_ptr,  # [B + 1] int32
    seq_lens_ptr,  # [B] int32
    block_tables_ptr,  # [B, max_blocks] int32
    sinks_ptr,  # [H_q] fp32 sink logits, read when HAS_SINKS
    num_reqs,
    num_q_heads,
    qk_scale,  # scale * log2(e) (the softmax runs on exp2); with HAS_SOFTCAP see below
    softcap,  # HAS_SOFTCAP: the cap * log2(e)
    window,  # HAS_WINDOW: the keys a query sees, itself included
    stride_qt,
    stride_qh,
    stride_ot,
    stride_oh,
    stride_cb,
    stride_cs,
    stride_ch,
    stride_bt,
    QUERIES_PER_KV: tl.constexpr,
    BLOCK_G: tl.constexpr,  # QUERIES_PER_KV rounded up to a power of two
    BLOCK_Q: tl.constexpr,  # query tokens per tile; a tile has BLOCK_Q * BLOCK_G rows
    BLOCK_N: tl.constexpr,  # keys per inner iteration
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # tokens per KV cache block
    NUM_SPLITS: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr,
    HAS_SINKS: tl.constexpr,
):
    """Grid ``(T // BLOCK_Q + num_reqs, H_kv, NUM_SPLITS)``.

    A program attends one tile of up to BLOCK_Q query tokens of one request, for all
    the query heads that share KV head ``program_id(1)``: rows are (token, head) pairs,
    so decodes still give ``tl.dot`` an M of at least 16 and each K/V tile is loaded
    once for the whole group. With NUM_SPLITS > 1 the program covers only slice
    ``program_id(2)`` of the keys and leaves unnormalised partial results for
    ``merge_splits_kernel``.

    With HAS_WINDOW a tile reads keys from its first query's window start on (rounded
    down to BLOCK_N), and the splits share out only those. With HAS_SOFTCAP, ``qk_scale``
    is ``2 * log2(e) * scale / cap``, so that ``exp2(dot * qk_scale)`` is ``exp(2x)`` of
    ``tanh(x)``, ``x = scale * dot / cap``. With HAS_SINKS each row's softmax starts from
    its head's sink, in split 0 only, so the sink counts once however the keys are split.
    """
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)

    req = _find_request(query_start_loc_ptr, num_reqs, tile, BLOCK_Q)
    q_start = tl.load(query_start_loc_ptr + req)
    q_len = tl.load(query_start_loc_ptr + req + 1) - q_start
    q_tile = tile - (q_start // BLOCK_Q + req)
    if q_tile * BLOCK_Q >= q_len:
        return  # a spare tile: the grid is an upper bound
    seq_len = tl.load(seq_lens_ptr + req)
    # The request's query tokens are the last q_len of its seq_len context positions.
    q_offset = seq_len - q_len

    BLOCK_M: tl.constexpr = BLOCK_Q * BLOCK_G
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q_local = q_tile * BLOCK_Q + offs_m // BLOCK_G
    group = offs_m % BLOCK_G
    row_valid = (q_local < q_len) & (group < QUERIES_PER_KV)
    q_pos = q_offset + q_local
    token = (q_start + q_local).to(tl.int64)
    head = kv_head * QUERIES_PER_KV + group
    d_valid = offs_d < HEAD_DIM  # head dims that are not a power of two are padded
    q_mask = row_valid[:, None] & d_valid[None, :]
    q = tl.load(
        query_ptr + token[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :],
        mask=q_mask,
        other=0.0,
    ).to(k_cache_ptr.dtype.element_ty)
    if UPCAST_DOT:
        q = q.to(tl.float32)

    # Causality: no row of this tile sees past its last query token.
    kv_end = q_offset + tl.minimum((q_tile + 1) * BLOCK_Q, q_len)
    kv_start = 0
    if HAS_WINDOW:
        # The tile's first query sees the earliest keys: the whole key tiles before its
        # window are never read, so a long context costs a windowed layer only its window.
        first_key = tl.maximum(q_offset + q_tile * BLOCK_Q - window + 1, 0)
        kv_start = first_key // BLOCK_N * BLOCK_N
    if NUM_SPLITS == 1:
        kv_lo = kv_start
        kv_hi = kv_end
    else:
        # Whole BLOCK_N tiles per split, so only a split's last tile is partial.
        per_split = tl.cdiv(tl.cdiv(kv_end - kv_start, NUM_SPLITS), BLOCK_N) * BLOCK_N
        kv_lo = kv_start + split * per_split
        kv_hi = tl.minimum(kv_lo + per_split, kv_end)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_SINKS:
        # The sink is one more key, of logit sinks[head] and value zero: the running max
        # starts at it with weight exp2(0) = 1. Later splits start empty, as without sinks.
        sink = tl.load(sinks_ptr + head, mask=row_valid, other=float("-inf"))
        if NUM_SPLITS > 1:
            sink = tl.where(split == 0, sink, float("-inf"))
        m_i = sink * 1.4426950408889634  # log2(e)
        l_i = tl.where(m_i == float("-inf"), 0.0, 1.0)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    block_table = block_tables_ptr + req.to(tl.int64) * stride_bt
    head_offset = kv_head * stride_ch

    for start in range(kv_lo, kv_hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_valid = offs_n < kv_hi
        # Per-key block lookup: BLOCK_N need not match the cache's block size.
        phys = tl.load(block_table + offs_n // BLOCK_SIZE, mask=n_valid, other=0).to(tl.int64)
        kv_off = phys * stride_cb + (offs_n % BLOCK_SIZE) * stride_cs + head_offset
        kv_mask = n_valid[:, None] & d_valid[None, :]
        # Masked lanes read nothing, so stale or NaN cache slots never reach the sums.
        k = tl.load(k_cache_ptr + kv_off[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + kv_off[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)
        if UPCAST_DOT:
            k = k.to(tl.float32)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        if HAS_SOFTCAP:
            # cap * tanh(x) as cap - 2 cap / (1 + exp(2x)): libdevice's tanh has no
            # interpreter version. exp2 overflowing to inf still gives +cap.
            scores = softcap - 2.0 * softcap / (1.0 + tl.exp2(scores))
        visible = (offs_n[None, :] <= q_pos[:, None]) & n_valid[None, :]
        if HAS_WINDOW:
            visible &= q_pos[:, None] - offs_n[None, :] < window
        scores = tl.where(visible, scores, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        # A row with nothing visible yet keeps max -inf; subtracting 0 instead avoids
        # inf - inf = NaN and still gives p = 0 and alpha = 0 for it.
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(scores - m_ref[:, None])
        alpha = tl.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        # P is rounded to the cache dtype, as flash attention does, for a 16-bit dot.
        p = p.to(v_cache_ptr.dtype.element_ty)
        if UPCAST_DOT:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new

    if NUM_SPLITS == 1:
        out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
        tl.store(
            out_ptr + token[:, None] * stride_ot + head[:, None] * stride_oh + offs_d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=q_mask,
        )
    else:
        part = (token * num_q_heads + head) * NUM_SPLITS + split
        tl.store(part_acc_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=q_mask)
        tl.store(part_max_ptr + part, m_i, mask=row_valid)
        tl.store(part_sum_ptr + part, l_i, mask=row_valid)


def paged_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    *,
    num_reqs: int,
    max_query_len: int,
    scale: float,
    num_splits: int = 1,
    window: int | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal paged attention for ``query`` ``[T, H_q, D]``; returns ``[T, H_q, D]``.

    Request ``i`` owns rows ``query_start_loc[i]:query_start_loc[i+1]``, the last
    positions of its ``seq_lens[i]`` tokens, whose K/V are read through
    ``block_tables[i]`` from caches ``[num_blocks, block_size, H_kv, D]``. Only host
    ints (``num_reqs``, shapes) size the launch: no device sync. ``max_query_len`` only
    picks the tile size; any value gives correct results.
    ``num_splits > 1`` splits each request's keys over that many programs and merges
    their partial softmaxes afterwards (flash decoding).
    ``window``, ``softcap`` and ``sinks`` (``[H_q]`` logits) are those of
    :class:`~llmkit.model.attention.base.AttentionSpec`.
    """
    num_tokens, num_q_heads, head_dim = query.shape
    _, block_size, num_kv_heads, cache_head_dim = k_cache.shape
    if cache_head_dim != head_dim or num_q_heads % num_kv_heads != 0:
        raise ValueError(
            f"query {tuple(query.shape)} does not fit a cache with {num_kv_heads} KV heads "
            f"of size {cache_head_dim}"
        )
    if k_cache.stride() != v_cache.stride() or k_cache.stride(-1) != 1:
        raise ValueError("k_cache and v_cache must share strides with a contiguous last dim")
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    if window is not None and window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"softcap must be > 0, got {softcap}")
    if sinks is not None:
        if sinks.shape != (num_q_heads,):
            raise ValueError(f"sinks must be [{num_q_heads}], got {tuple(sinks.shape)}")
        sinks = sinks.to(device=query.device, dtype=torch.float32).contiguous()
    upcast = check_launchable(paged_attention_kernel, query)
    query = query if query.stride(-1) == 1 else query.contiguous()
    out = torch.empty_like(query, memory_format=torch.contiguous_format)
    if num_tokens == 0 or num_reqs == 0:
        return out

    cfg = tile_config(max_query_len, num_q_heads // num_kv_heads, head_dim, k_cache.element_size())
    launch = {"num_warps": cfg.pop("num_warps"), "num_stages": cfg.pop("num_stages")}
    grid = (num_tokens // cfg["BLOCK_Q"] + num_reqs, num_kv_heads, num_splits)
    if num_splits == 1:
        part_acc = part_max = part_sum = out  # unused: that branch is compiled out
    else:
        part_acc = query.new_empty(
            (num_tokens, num_q_heads, num_splits, head_dim), dtype=torch.float32
        )
        part_max = part_acc.new_empty((num_tokens, num_q_heads, num_splits))
        part_sum = torch.empty_like(part_max)

    qk_scale = scale * LOG2E
    if softcap is not None:
        qk_scale = 2.0 * qk_scale / softcap
    paged_attention_kernel[grid](
        out,
        part_acc,
        part_max,
        part_sum,
        query,
        k_cache,
        v_cache,
        query_start_loc,
        seq_lens,
        block_tables,
        sinks if sinks is not None else out,  # unused without sinks: compiled out
        num_reqs,
        num_q_heads,
        qk_scale,
        0.0 if softcap is None else softcap * LOG2E,
        0 if window is None else window,
        query.stride(0),
        query.stride(1),
        out.stride(0),
        out.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        block_tables.stride(0),
        QUERIES_PER_KV=num_q_heads // num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size,
        NUM_SPLITS=num_splits,
        UPCAST_DOT=upcast,
        HAS_WINDOW=window is not None,
        HAS_SOFTCAP=softcap is not None,
        HAS_SINKS=sinks is not None,
        **cfg,
        **launch,
    )
    if num_splits > 1:
        merge_splits(out, part_acc, part_max, part_sum)
    return out
