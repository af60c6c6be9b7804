"""The C decode-attention kernel splits long contexts into spans of slots over the threads
(flash-decoding's split) and merges them: the same numbers as attention by definition for
one long request and for long and short ones together, at every split the thread count
gives, with each layer spec."""

from __future__ import annotations

import pytest
import torch
from tests.model.attention.test_torch_attention import naive

from llmkit.model.attention import AttentionSpec, paged_decode_cpu

pytestmark = pytest.mark.skipif(paged_decode_cpu.load() is None, reason="no kernel here")

BLOCK = 16
SPECS = {
    "plain": {},
    "window": {"window": 300},  # shorter than the long context: spans of the window only
    "softcap-sinks": {"softcap": 5.0, "sinks": True},
}


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.float16], ids=["kv32", "kv16"])
@pytest.mark.parametrize("spec", list(SPECS), ids=list(SPECS))
@pytest.mark.parametrize("seq_lens", [[1500], [1100, 70, 1]], ids=["one", "mixed"])
def test_long_contexts_split_into_spans_match_by_definition(seq_lens, spec, kv_dtype, threads):
    torch.manual_seed(0)
    kv_heads, group, head_dim = 3, 3, 64
    fields = dict(SPECS[spec])
    if fields.pop("sinks", False):
        fields["sinks"] = torch.randn(kv_heads * group) * 2
    layer = AttentionSpec(head_dim**-0.5, **fields)
    widths = [-(-n // BLOCK) for n in seq_lens]
    order = torch.randperm(sum(widths) + 2).tolist()  # blocks scattered over the cache
    tables = torch.zeros(len(seq_lens), max(widths), dtype=torch.int32)
    k_cache = torch.zeros(len(order), BLOCK, kv_heads, head_dim, dtype=kv_dtype)
    v_cache = torch.zeros_like(k_cache)
    keys, values, used = [], [], 0
    for i, (n, w) in enumerate(zip(seq_lens, widths)):
        tables[i, :w] = torch.tensor(order[used : used + w])
        used += w
        k, v = (torch.randn(n, kv_heads, head_dim).to(kv_dtype) for _ in range(2))
        for t in range(n):
            k_cache[tables[i, t // BLOCK], t % BLOCK] = k[t]
            v_cache[tables[i, t // BLOCK], t % BLOCK] = v[t]
        keys.append(k)
        values.append(v)
    query = torch.randn(len(seq_lens), kv_heads * group, head_dim)
    out = torch.zeros_like(query)
    rows = torch.arange(len(seq_lens))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        paged_decode_cpu.paged_decode(
            query, k_cache, v_cache, tables, torch.tensor(seq_lens, dtype=torch.int32),
            rows, rows, out, layer,
        )  # fmt: skip
    finally:
        torch.set_num_threads(before)
    for i in range(len(seq_lens)):
        want = naive(query[i : i + 1], keys[i], values[i], layer)[0]
        err = ((out[i].double() - want).abs().max() / want.abs().max()).item()
        assert err < 1e-5, f"request {i} ({seq_lens[i]} slots): relative error {err:.1e}"
