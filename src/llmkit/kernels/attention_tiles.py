"""The paged attention kernel's tile sizes, chosen on the host from a batch's shape."""

from __future__ import annotations

import triton


def tile_config(
    max_query_len: int, queries_per_kv: int, head_dim: int, elem_size: int
) -> dict[str, int]:
    """Tile sizes for a batch whose longest query run is ``max_query_len`` tokens.

    A tile is BLOCK_Q tokens times the padded GQA group. It has at least 16 rows (the
    smallest ``tl.dot``) and at most 64 unless the group alone is larger: decodes get
    BLOCK_Q = 16 / group (or 1) instead of wasting a 64-row tile on one token. The
    sizes keep sm_80/sm_90 builds free of register spills (checked with
    ``cuobjdump --dump-resource-usage``); fp32 runs its exact ``ieee`` dots on FMA
    units, which need far more registers, hence its narrower key tiles.
    """
    block_g = triton.next_power_of_2(queries_per_kv)
    block_d = max(16, triton.next_power_of_2(head_dim))
    max_rows = 64 if elem_size < 4 or block_d <= 128 else 16
    rows = block_g * triton.next_power_of_2(max(1, max_query_len))
    block_m = max(block_g, min(max_rows, max(16, rows)))
    if elem_size >= 4:
        block_n = 16
    else:
        block_n = 64 if block_d <= 128 else 32
    big_tile = elem_size >= 4 or block_m * block_d > 16 * 128
    return {
        "BLOCK_G": block_g,
        "BLOCK_Q": block_m // block_g,
        "BLOCK_N": block_n,
        "BLOCK_D": block_d,
        "num_warps": 8 if big_tile else 4,
        "num_stages": 2,
    }
