"""Write a step's new keys and values into the paged KV cache through ``slot_mapping``."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .runtime import check_launchable


@triton.jit
def reshape_and_cache_kernel(
    key_ptr,  # [T, H_kv, D]
    value_ptr,  # [T, H_kv, D]
    k_cache_ptr,  # [num_blocks, BLOCK_SIZE, H_kv, D]
    v_cache_ptr,  # same shape and strides as k_cache
    slot_mapping_ptr,  # [T] int64; -1 writes nothing
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_cb,
    stride_cs,
    stride_ch,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    """One program per token: copies all of its KV heads into cache slot ``slot_mapping[t]``."""
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    if slot < 0:
        return
    block = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_h[:, None] < NUM_KV_HEADS) & (offs_d[None, :] < HEAD_DIM)

    src_k = key_ptr + token * stride_kt + offs_h[:, None] * stride_kh + offs_d[None, :]
    src_v = value_ptr + token * stride_vt + offs_h[:, None] * stride_vh + offs_d[None, :]
    dst = block * stride_cb + offset * stride_cs + offs_h[:, None] * stride_ch + offs_d[None, :]
    k = tl.load(src_k, mask=mask)
    v = tl.load(src_v, mask=mask)
    tl.store(k_cache_ptr + dst, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_cache_ptr + dst, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Store ``key``/``value`` ``[T, H_kv, D]`` at ``slot_mapping`` ``[T]`` (``-1`` is skipped).

    ``k_cache``/``v_cache`` are ``[num_blocks, block_size, H_kv, D]`` with equal strides.
    """
    num_tokens = key.shape[0]
    if num_tokens == 0:
        return
    _, block_size, num_kv_heads, head_dim = k_cache.shape
    if key.shape[1:] != (num_kv_heads, head_dim) or value.shape != key.shape:
        raise ValueError(
            f"key/value must be [T, {num_kv_heads}, {head_dim}], got {tuple(key.shape)} "
            f"and {tuple(value.shape)}"
        )
    if k_cache.stride() != v_cache.stride() or k_cache.stride(-1) != 1:
        raise ValueError("k_cache and v_cache must share strides with a contiguous last dim")
    check_launchable(reshape_and_cache_kernel, key)
    # The kernel addresses head_dim with unit stride; views from a fused QKV projection
    # keep that, so this copies only in unusual layouts.
    key = key if key.stride(-1) == 1 else key.contiguous()
    value = value if value.stride(-1) == 1 else value.contiguous()

    block_h = triton.next_power_of_2(num_kv_heads)
    block_d = triton.next_power_of_2(head_dim)
    reshape_and_cache_kernel[(num_tokens,)](
        key,
        value,
        k_cache,
        v_cache,
        slot_mapping,
        key.stride(0),
        key.stride(1),
        value.stride(0),
        value.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_H=block_h,
        BLOCK_D=block_d,
        BLOCK_SIZE=block_size,
        num_warps=4 if block_h * block_d >= 1024 else 1,
    )
