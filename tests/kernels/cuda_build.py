"""Compile the kernels for CUDA GPUs ahead of time, with no GPU: ``python cuda_build.py``.

Run with ``TRITON_INTERPRET`` unset (the interpreter's kernels cannot be compiled).
Prints each variant's registers, stack (spills) and shared memory; exits non-zero if
a variant fails to build. Pointers and strides are declared 16-divisible, as Triton
specializes them at launch for real caches and projections.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from llmkit.kernels.attention_tiles import tile_config
from llmkit.kernels.merge_splits import merge_splits_kernel
from llmkit.kernels.paged_attention import paged_attention_kernel
from llmkit.kernels.reshape_and_cache import reshape_and_cache_kernel

ARCHS = (80, 90)
TRITON_DTYPES = {2: "bf16", 4: "fp32"}
# (query heads per KV head, head dim, longest query run, splits, window + soft-cap + sinks):
# decode, split decode, prefill, a large GQA group, and a gpt-oss-shaped prefill with all three.
ATTENTION_VARIANTS = [
    (4, 128, 1, 1, False),
    (4, 128, 1, 4, False),
    (1, 64, 512, 1, False),
    (8, 128, 256, 1, False),
    (8, 64, 512, 1, True),
]
PARTIALS = dict.fromkeys(("part_acc_ptr", "part_max_ptr", "part_sum_ptr"), "*fp32")


def build(kernel, types: dict[str, str], constexprs: dict, options: dict, cc: int):
    names = kernel.arg_names
    signature = {n: "constexpr" if n in constexprs else types.get(n, "i32") for n in names}
    divisible = {
        (i,): [["tt.divisibility", 16]]
        for i, n in enumerate(names)
        if n.endswith("_ptr") or (n.startswith("stride") and n != "stride_bt")
    }
    src = ASTSource(kernel, signature, constexprs, divisible)
    return triton.compile(src, target=GPUTarget("cuda", cc, 32), options=options)


def resource_usage(compiled) -> str:
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        try:
            dump = subprocess.run(
                [cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True
            ).stdout
        except OSError:
            return "?"
    found = re.search(r"REG:(\d+) STACK:(\d+)", dump)
    return f"regs {found.group(1)} stack {found.group(2)}" if found else "?"


def main() -> None:
    for cc in ARCHS:
        for elem_size, dt in TRITON_DTYPES.items():
            for group, head_dim, max_query_len, splits, spec in ATTENTION_VARIANTS:
                cfg = tile_config(max_query_len, group, head_dim, elem_size)
                options = {"num_warps": cfg.pop("num_warps"), "num_stages": cfg.pop("num_stages")}
                constexprs = dict(
                    QUERIES_PER_KV=group,
                    HEAD_DIM=head_dim,
                    BLOCK_SIZE=16,
                    NUM_SPLITS=splits,
                    UPCAST_DOT=False,
                    HAS_WINDOW=spec,
                    HAS_SOFTCAP=spec,
                    HAS_SINKS=spec,
                    **cfg,
                )
                types = {
                    **dict.fromkeys(
                        ("out_ptr", "query_ptr", "k_cache_ptr", "v_cache_ptr"), f"*{dt}"
                    ),
                    **PARTIALS,
                    **dict.fromkeys(("query_start_loc_ptr", "seq_lens_ptr"), "*i32"),
                    "block_tables_ptr": "*i32",
                    "sinks_ptr": "*fp32",
                    "qk_scale": "fp32",
                    "softcap": "fp32",
                }
                k = build(paged_attention_kernel, types, constexprs, options, cc)
                print(
                    f"sm_{cc} {dt} paged_attention group={group} head_dim={head_dim} "
                    f"max_query_len={max_query_len} splits={splits} spec={spec} {cfg} {options}: "
                    f"{resource_usage(k)} smem {k.metadata.shared}"
                )
            k = build(
                merge_splits_kernel,
                {"out_ptr": f"*{dt}", **PARTIALS},
                dict(NUM_SPLITS=5, BLOCK_S=8, HEAD_DIM=128, BLOCK_D=128),
                {"num_warps": 2},
                cc,
            )
            print(f"sm_{cc} {dt} merge_splits: {resource_usage(k)}")
            k = build(
                reshape_and_cache_kernel,
                dict.fromkeys(("key_ptr", "value_ptr", "k_cache_ptr", "v_cache_ptr"), f"*{dt}")
                | {"slot_mapping_ptr": "*i64"},
                dict(NUM_KV_HEADS=8, HEAD_DIM=128, BLOCK_H=8, BLOCK_D=128, BLOCK_SIZE=16),
                {"num_warps": 4},
                cc,
            )
            print(f"sm_{cc} {dt} reshape_and_cache: {resource_usage(k)}")


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        sys.exit("unset TRITON_INTERPRET: interpreted kernels cannot be compiled")
    main()
