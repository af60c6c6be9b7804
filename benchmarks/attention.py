"""Paged attention on CUDA: the Triton kernels vs the torch reference backend.

    python benchmarks/attention.py [--dtype bf16] [--heads 32 8] [--head-dim 128]

Times decode batches (1..256 requests at 128..8192 tokens of context) and mixed prefill
+ decode steps as CUDA graph replays (``triton.testing.do_bench_cudagraph``, median), so
the numbers are the GPU's time, not the host's launch time. For each it prints the achieved
HBM bandwidth (K/V read once per step, plus Q read and O written, over the time), that as
a share of this GPU's copy bandwidth measured in the same run, the time without split-KV,
the speed-up over the torch backend, and for decodes and whole prompts the time of
``scaled_dot_product_attention`` on its flash backend over K/V already gathered into
contiguous ``[batch, kv_heads, context, head_dim]`` tensors (the gather not timed: the
best a non-paged kernel does on the same shape), as a markdown table.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import torch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
DECODE_BATCHES = (1, 8, 32, 64, 128, 256)
DECODE_CONTEXTS = (128, 512, 2048, 8192)
PREFILLS = ((4, 1024), (1, 4096), (8, 512), (2, 2048))


@dataclass
class Case:
    label: str
    prior: list[int]  # tokens already cached, per request
    q_lens: list[int]  # new tokens this step, per request

    @property
    def seq_lens(self) -> list[int]:
        return [p + q for p, q in zip(self.prior, self.q_lens)]


def cases() -> list[Case]:
    out = [
        Case(f"decode b={b} ctx={ctx}", [ctx - 1] * b, [1] * b)
        for ctx in DECODE_CONTEXTS
        for b in DECODE_BATCHES
    ]
    # Chunked-prefill steps as a scheduler forms them: one prompt chunk (fresh, or a
    # later chunk of a long prompt) sharing the step with running decodes.
    out.append(Case("mixed: 2048 prompt + 64 decodes", [0] + [2047] * 64, [2048] + [1] * 64))
    out.append(Case("mixed: 512 of 4096 + 32 decodes", [3584] + [4095] * 32, [512] + [1] * 32))
    # Whole prompts (a first step, or a batch job): SDPA flash's home ground.
    out += [Case(f"prefill: {b} x {n}", [0] * b, [n] * b) for b, n in PREFILLS]
    return out


def build(case: Case, heads: tuple[int, int], head_dim: int, block_size: int, dtype, device):
    """Query, caches filled with random K/V, and metadata; blocks scattered at random."""
    from llmkit.model.attention import AttentionMetadata

    num_q_heads, num_kv_heads = heads
    seq_lens = case.seq_lens
    blocks_per_req = [-(-s // block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_req)
    order = torch.randperm(num_blocks)
    tables = torch.zeros(len(seq_lens), max(blocks_per_req), dtype=torch.int32)
    used = 0
    for i, n in enumerate(blocks_per_req):
        tables[i, :n] = order[used : used + n]
        used += n
    starts = [0]
    for q in case.q_lens:
        starts.append(starts[-1] + q)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, dtype=dtype, device=device)
    v_cache = torch.randn(shape, dtype=dtype, device=device)
    query = torch.randn(starts[-1], num_q_heads, head_dim, dtype=dtype, device=device)
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        block_tables=tables.to(device),
        slot_mapping=torch.full((starts[-1],), -1, dtype=torch.int64, device=device),
        max_query_len=max(case.q_lens),
        max_seq_len=max(seq_lens),
        query_start_loc_host=starts,
        seq_lens_host=seq_lens,
    )
    return query, k_cache, v_cache, meta


def min_bytes(case: Case, heads: tuple[int, int], head_dim: int, elem: int) -> int:
    """Bytes a perfect kernel moves: each K/V row read once, Q read and O written once."""
    num_q_heads, num_kv_heads = heads
    kv = 2 * sum(case.seq_lens) * num_kv_heads * head_dim * elem
    qo = 2 * sum(case.q_lens) * num_q_heads * head_dim * elem
    return kv + qo


def flops(case: Case, heads: tuple[int, int], head_dim: int) -> int:
    """QK^T and PV over the causally visible keys of every query token."""
    visible = sum(sum(p + j + 1 for j in range(q)) for p, q in zip(case.prior, case.q_lens))
    return 4 * visible * heads[0] * head_dim


def copy_bandwidth(do_bench, device) -> float:
    """This GPU's device-to-device copy rate in bytes/s (read + write), on 1 GiB."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src))
    return 2 * src.numel() / (ms * 1e-3)


def sdpa_flash_ms(do_bench, query, k_cache, v_cache, meta) -> float:
    """SDPA's flash kernel on this batch's K/V gathered to contiguous tensors: a decode
    batch, or whole prompts of one length (causal)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    num_reqs, ctx = meta.num_reqs, meta.max_seq_len
    blocks = -(-ctx // k_cache.shape[1])
    table = meta.block_tables[:, :blocks].long()

    def gather(cache: torch.Tensor) -> torch.Tensor:
        rows = cache[table].flatten(1, 2)[:, :ctx]  # [B, ctx, kv_heads, D]
        return rows.transpose(1, 2).contiguous()

    k, v = gather(k_cache), gather(v_cache)
    q_len = meta.max_query_len  # 1 (decode) or the prompt length (prefill)
    q = query.view(num_reqs, q_len, *query.shape[1:]).transpose(1, 2)
    causal = q_len > 1
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        try:
            scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        except RuntimeError:  # a flash kernel without GQA: give it every query head's K/V
            group = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            print(f"(SDPA flash without GQA: K/V expanded {group}x)", file=sys.stderr)
        return do_bench(
            lambda: scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        )


def timed(do_bench, backend, inputs: tuple) -> float:
    """The median time of one forward, in ms."""
    return do_bench(lambda: backend.forward(*inputs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    parser.add_argument("--heads", type=int, nargs=2, default=(32, 8), metavar=("Q", "KV"))
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--skip-torch", action="store_true", help="skip the torch reference")
    parser.add_argument("--only", default="", help="only the cases whose label starts so")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit(
            "benchmarks/attention.py needs a CUDA GPU: it times the Triton kernels on the "
            "device (on the CPU they only run under the interpreter, for tests)."
        )

    from triton.testing import do_bench as plain_do_bench
    from triton.testing import do_bench_cudagraph

    def do_bench(fn) -> float:
        return do_bench_cudagraph(fn, return_mode="median")

    def plain_bench(fn) -> float:
        return plain_do_bench(fn, return_mode="median")

    from llmkit.model.attention import AttentionSpec, TorchAttentionBackend
    from llmkit.model.attention.triton import (
        TritonAttentionBackend,
        choose_num_splits,
        compute_units,
    )

    device = torch.device("cuda")
    dtype = DTYPES[args.dtype]
    heads = tuple(args.heads)
    elem = torch.empty(0, dtype=dtype).element_size()
    # Not from a graph: on an H100 the captured copy ran at 2440 GB/s against 3003 eager.
    copy_bw = copy_bandwidth(plain_bench, device)
    props = torch.cuda.get_device_properties(device)
    print(
        f"{props.name}, {props.multi_processor_count} SMs; {args.dtype}, "
        f"heads {heads[0]}/{heads[1]}, head_dim {args.head_dim}, block_size {args.block_size}; "
        f"copy bandwidth {copy_bw / 1e9:.0f} GB/s\n"
    )
    print(
        "| case | splits | triton µs | no-split µs | torch µs | vs torch "
        "| SDPA flash µs | vs SDPA | GB/s | % copy BW | TFLOP/s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    auto, unsplit = TritonAttentionBackend(), TritonAttentionBackend(num_splits=1)
    reference = TorchAttentionBackend()
    scale = args.head_dim**-0.5
    for case in (c for c in cases() if c.label.startswith(args.only)):
        query, k_cache, v_cache, meta = build(
            case, heads, args.head_dim, args.block_size, dtype, device
        )
        splits = choose_num_splits(
            max_query_len=meta.max_query_len,
            max_seq_len=meta.max_seq_len,
            num_reqs=meta.num_reqs,
            num_kv_heads=heads[1],
            num_compute_units=compute_units(device),
        )
        inputs = (query, k_cache, v_cache, meta, AttentionSpec(scale))
        ms = timed(do_bench, auto, inputs)
        ms_unsplit = timed(do_bench, unsplit, inputs) if splits > 1 else ms
        # The torch backend copies host metadata to the GPU, which a graph cannot capture.
        ms_torch = math.nan if args.skip_torch else timed(plain_bench, reference, inputs)
        # SDPA takes one query length for every request: decodes, or prompts alike.
        same = len(set(case.q_lens)) == 1 and (case.q_lens[0] == 1 or not any(case.prior))
        ms_sdpa = sdpa_flash_ms(do_bench, query, k_cache, v_cache, meta) if same else math.nan
        # Agreement check, so a fast but wrong kernel cannot post a number.
        if not args.skip_torch:
            got = auto.forward(query, k_cache, v_cache, meta, AttentionSpec(scale)).float()
            want = reference.forward(query, k_cache, v_cache, meta, AttentionSpec(scale)).float()
            err = ((got - want).abs().max() / want.abs().max()).item()
            if err > 2e-2:
                sys.exit(f"{case.label}: triton and torch disagree (relative error {err:.1e})")
        bw = min_bytes(case, heads, args.head_dim, elem) / (ms * 1e-3)
        tflops = flops(case, heads, args.head_dim) / (ms * 1e-3) / 1e12
        sdpa = f"{ms_sdpa * 1e3:.1f} | {ms_sdpa / ms:.2f}x" if same else "- | -"
        print(
            f"| {case.label} | {splits} | {ms * 1e3:.1f} | {ms_unsplit * 1e3:.1f} | "
            f"{ms_torch * 1e3:.1f} | {ms_torch / ms:.2f}x | {sdpa} | {bw / 1e9:.0f} | "
            f"{100 * bw / copy_bw:.0f}% | {tflops:.1f} |"
        )
        del query, k_cache, v_cache, meta, inputs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
