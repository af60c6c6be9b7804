"""The torch attention backend against attention written out in float64, request by request.

The torch backend is the reference the Triton kernels and the engine's HF parity rest on; here
it meets the definition directly, on steps whose prefills span several query chunks (with and
without cached context), whose decodes form several length-sorted groups, and with GQA; and
so does the C decode kernel (float32 queries on CPU, float32 or float16 caches) that replaces
the decode groups where it builds.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
import torch

from llmkit.kernels.cpu import loader
from llmkit.model.attention import AttentionMetadata, AttentionSpec, paged_decode_cpu
from llmkit.model.attention.torch import _QUERY_CHUNK, TorchAttentionBackend

BLOCK = 16


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: AttentionSpec) -> torch.Tensor:
    """``q`` ``[Q, H, D]``, the last Q positions of ``k``/``v`` ``[L, H_kv, D]``, causal,
    within ``spec.window``, soft-capped, with a zero-valued sink key per head."""
    q_len, ctx_len = q.shape[0], k.shape[0]
    group = q.shape[1] // k.shape[1]
    k, v = (t.double().repeat_interleave(group, dim=1) for t in (k, v))
    scores = torch.einsum("qhd,lhd->hql", q.double(), k) * spec.scale
    if spec.softcap is not None:
        scores = spec.softcap * torch.tanh(scores / spec.softcap)
    keys, queries = torch.arange(ctx_len)[None, :], torch.arange(ctx_len - q_len, ctx_len)[:, None]
    hidden = keys > queries
    if spec.window is not None:
        hidden |= queries - keys >= spec.window
    scores.masked_fill_(hidden, float("-inf"))
    if spec.sinks is not None:
        sink = spec.sinks.double()[:, None, None].expand(-1, q_len, 1)
        probs = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]
        return torch.einsum("hql,lhd->qhd", probs, v)
    return torch.einsum("hql,lhd->qhd", scores.softmax(-1), v)


@pytest.mark.parametrize(
    ("dtype", "kv_dtype", "tolerance"),
    [
        (torch.float32, torch.float32, 1e-5),
        (torch.bfloat16, torch.bfloat16, 2e-2),
        (torch.float32, torch.float16, 3e-3),  # kv_cache_dtype float16: keys, values rounded
    ],
    ids=["fp32", "bf16", "fp32-kv16"],
)
@pytest.mark.parametrize(("kv_heads", "group", "head_dim"), [(2, 4, 64), (3, 1, 32)])
@pytest.mark.parametrize("decode_kernel", [True, False], ids=["kernel", "torch"])
def test_step_matches_attention_by_definition(
    dtype, kv_dtype, tolerance, kv_heads, group, head_dim, decode_kernel
):
    _check_step(dtype, kv_dtype, tolerance, kv_heads, group, head_dim, decode_kernel, None)


SPECS = {
    "window": {"window": 40},
    "softcap": {"softcap": 2.0},
    "sinks": {"sinks": True},
    "all": {"window": 100, "softcap": 5.0, "sinks": True},  # a window wider than a chunk
}


@pytest.mark.parametrize("spec", list(SPECS), ids=list(SPECS))
@pytest.mark.parametrize("decode_kernel", [True, False], ids=["kernel", "torch"])
def test_layer_specs_match_attention_by_definition(spec, decode_kernel):
    """Sliding windows (shorter than the prompts and the chunks, and longer), soft-capped
    scores and attention sinks: prefill chunks, decode groups and the C decode kernel."""
    _check_step(torch.float32, torch.float32, 1e-5, 2, 4, 32, decode_kernel, SPECS[spec])


def _check_step(dtype, kv_dtype, tolerance, kv_heads, group, head_dim, decode_kernel, spec):
    rng = random.Random(0)
    torch.manual_seed(0)
    # (cached tokens, new tokens): prefills over 1-3 query chunks, one after cached context,
    # and 11 decodes (two groups) of lengths 1..300.
    steps = [(0, 2 * _QUERY_CHUNK + 37), (90, _QUERY_CHUNK + 5), (0, 7), (33, 1)]
    steps += [(rng.randint(0, 300), 1) for _ in range(10)]
    seq_lens = [p + n for p, n in steps]
    widths = [-(-s // BLOCK) for s in seq_lens]
    num_blocks = sum(widths) + 3
    order = torch.randperm(num_blocks).tolist()  # blocks scattered over the cache
    tables = torch.zeros(len(steps), max(widths), dtype=torch.int32)
    used = 0
    for i, w in enumerate(widths):
        tables[i, :w] = torch.tensor(order[used : used + w])
        used += w
    keys = [torch.randn(s, kv_heads, head_dim).to(dtype) for s in seq_lens]
    values = [torch.randn(s, kv_heads, head_dim).to(dtype) for s in seq_lens]
    queries = [torch.randn(n, kv_heads * group, head_dim).to(dtype) for _, n in steps]
    k_cache = torch.zeros(num_blocks, BLOCK, kv_heads, head_dim, dtype=kv_dtype)
    v_cache = torch.zeros_like(k_cache)
    backend = TorchAttentionBackend(decode_kernel)
    slots = torch.cat(
        [
            tables[i].long().repeat_interleave(BLOCK)[:s] * BLOCK + torch.arange(s) % BLOCK
            for i, s in enumerate(seq_lens)
        ]
    )
    backend.write_kv(torch.cat(keys), torch.cat(values), k_cache, v_cache, slots)
    starts = [0]
    for _, n in steps:
        starts.append(starts[-1] + n)
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(starts, dtype=torch.int32),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        block_tables=tables,
        slot_mapping=torch.full((starts[-1],), -1, dtype=torch.long),
        max_query_len=max(n for _, n in steps),
        max_seq_len=max(seq_lens),
        query_start_loc_host=starts,
        seq_lens_host=seq_lens,
    )
    fields = dict(spec or {})
    if fields.pop("sinks", False):
        fields["sinks"] = torch.randn(kv_heads * group) * 2
    layer = AttentionSpec(head_dim**-0.5, **fields)
    backend.prepare(meta, BLOCK, dtype)
    plan = backend._plan_for(meta, BLOCK, dtype)  # the one prepare() made
    kernel = decode_kernel and dtype == torch.float32 and paged_decode_cpu.load() is not None
    assert (plan.kernel_decodes is not None) == kernel
    out = backend.forward(torch.cat(queries), k_cache, v_cache, meta, layer)
    assert out.dtype == dtype
    for i, q in enumerate(queries):
        want = naive(q, keys[i], values[i], layer)
        got = out[starts[i] : starts[i + 1]].double()
        err = ((got - want).abs().max() / want.abs().max()).item()
        assert err < tolerance, f"request {i} {steps[i]}: relative error {err:.1e}"


def test_without_a_compiler_the_torch_path_runs(monkeypatch, tmp_path):
    """No C compiler (or a broken one): load() says so and the backend keeps its torch ops."""
    paged_decode_cpu.load.cache_clear()
    monkeypatch.setattr(loader, "PREBUILT", tmp_path)  # none built at install either
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    try:
        assert paged_decode_cpu.load() is None
        meta = AttentionMetadata(
            query_start_loc=torch.tensor([0, 1, 2], dtype=torch.int32),
            seq_lens=torch.tensor([3, 5], dtype=torch.int32),
            block_tables=torch.tensor([[0], [1]], dtype=torch.int32),
            slot_mapping=torch.tensor([2, 20], dtype=torch.long),
            max_query_len=1,
            max_seq_len=5,
            query_start_loc_host=[0, 1, 2],
            seq_lens_host=[3, 5],
        )
        backend = TorchAttentionBackend()
        backend.prepare(meta, BLOCK, torch.float32)
        plan = backend._plan_for(meta, BLOCK, torch.float32)
        assert plan.kernel_decodes is None and len(plan.decode_groups) == 1
    finally:
        paged_decode_cpu.load.cache_clear()


def test_loading_the_kernel_leaves_float_semantics_alone():
    """The kernel's library must not switch the process to flush-to-zero (as one linked with
    -ffast-math does): subnormal floats still exist after it loads."""
    script = (
        "from llmkit.model.attention import paged_decode_cpu\n"
        "assert paged_decode_cpu.load() is not None\n"
        "x = float('5e-324')\n"
        "print(x * 1.0 > 0, x / 2.0 == 0)\n"
    )
    if paged_decode_cpu.load() is None:
        pytest.skip("no C compiler here")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]
