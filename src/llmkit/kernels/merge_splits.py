"""Merge split-KV partial attention results by log-sum-exp (the second flash-decoding pass)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def merge_splits_kernel(
    out_ptr,  # [T, H_q, D]
    part_acc_ptr,  # [T, H_q, NUM_SPLITS, D] fp32, unnormalised sum of p * v per split
    part_max_ptr,  # [T, H_q, NUM_SPLITS] fp32, max score per split in log2 units
    part_sum_ptr,  # [T, H_q, NUM_SPLITS] fp32, sum of exp2(score - max) per split
    num_q_heads,
    stride_ot,
    stride_oh,
    NUM_SPLITS: tl.constexpr,
    BLOCK_S: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """Grid ``(T, H_q)``: rescales every split to the global max and normalises once."""
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    row = token * num_q_heads + head
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_valid = offs_s < NUM_SPLITS
    d_valid = offs_d < HEAD_DIM

    # A split that saw no key (past a short context, or past a row's causal limit)
    # reports max -inf and sum 0, so its weight below is exactly 0.
    m = tl.load(part_max_ptr + row * NUM_SPLITS + offs_s, mask=s_valid, other=float("-inf"))
    sums = tl.load(part_sum_ptr + row * NUM_SPLITS + offs_s, mask=s_valid, other=0.0)
    m_max = tl.max(m, axis=0)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)
    w = tl.exp2(m - m_max)
    denom = tl.sum(sums * w, axis=0)

    acc = tl.load(
        part_acc_ptr + (row * NUM_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
        mask=s_valid[:, None] & d_valid[None, :],
        other=0.0,
    )
    out = tl.sum(acc * w[:, None], axis=0) / tl.where(denom > 0.0, denom, 1.0)
    tl.store(
        out_ptr + token * stride_ot + head * stride_oh + offs_d,
        out.to(out_ptr.dtype.element_ty),
        mask=d_valid,
    )


def merge_splits(
    out: torch.Tensor, part_acc: torch.Tensor, part_max: torch.Tensor, part_sum: torch.Tensor
) -> None:
    """Write into ``out`` ``[T, H_q, D]`` the merge of ``part_acc`` ``[T, H_q, S, D]`` etc."""
    num_tokens, num_q_heads, num_splits, head_dim = part_acc.shape
    block_d = triton.next_power_of_2(head_dim)
    merge_splits_kernel[(num_tokens, num_q_heads)](
        out,
        part_acc,
        part_max,
        part_sum,
        num_q_heads,
        out.stride(0),
        out.stride(1),
        NUM_SPLITS=num_splits,
        BLOCK_S=triton.next_power_of_2(num_splits),
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
        num_warps=1 if block_d <= 64 else 2,
    )
