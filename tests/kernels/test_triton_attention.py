"""The Triton attention backend against the torch reference, on small random batches.

Every test draws fresh inputs (the ``seed`` fixture; a failure prints the seed, and
``LLMKIT_KERNEL_SEED=<seed>`` replays it). Outputs are compared by relative error,
``max|out - ref| / max|ref|``, with the reference computed in fp32 from the same,
already rounded, inputs: below 1e-5 for fp32 caches, 2e-3 for fp16 and 1.6e-2 for bf16
(a few units of the 16-bit formats' rounding of P and of the output).

Cache slots that no request's context covers are filled with NaN in the caches the
kernels read, so a kernel that loads (rather than masks) a slot it should not use
produces NaN; the reference reads a clean copy. With a sliding window, so are the slots
a key tile's width or more before every window of a request: a kernel must skip them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import pytest
import torch

from llmkit.model.attention import (
    AttentionMetadata,
    AttentionSpec,
    TorchAttentionBackend,
    create_backend,
)
from llmkit.model.attention.triton import TritonAttentionBackend, choose_num_splits

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Shape:
    num_kv_heads: int
    group: int  # query heads per KV head
    head_dim: int
    block_size: int
    dtype: torch.dtype

    @property
    def num_q_heads(self) -> int:
        return self.num_kv_heads * self.group


@dataclass
class Batch:
    query: torch.Tensor  # [T, H_q, D]
    k_cache: torch.Tensor  # NaN in every slot outside the requests' contexts
    v_cache: torch.Tensor
    k_clean: torch.Tensor  # the same caches with finite values everywhere
    v_clean: torch.Tensor
    meta: AttentionMetadata
    spec: AttentionSpec


def make_batch(
    seed: int,
    device: torch.device,
    shape: Shape,
    prior: list[int],
    q_lens: list[int],
    shared: dict[int, int] | None = None,
) -> Batch:
    """Request ``i`` has ``prior[i]`` cached tokens and ``q_lens[i]`` new ones.

    ``shared`` maps a request to how many of its first blocks are request 0's physical
    blocks, as prefix caching does.
    """
    gen = torch.Generator().manual_seed(seed)
    bs = shape.block_size
    seq_lens = [p + q for p, q in zip(prior, q_lens)]
    shared = shared or {}
    num_blocks_per_req = [cdiv(s, bs) for s in seq_lens]
    num_blocks = sum(num_blocks_per_req) + 3
    free = torch.randperm(num_blocks, generator=gen).tolist()
    rows: list[list[int]] = []
    for i, n in enumerate(num_blocks_per_req):
        n_shared = shared.get(i, 0)
        assert n_shared * bs <= min(prior[i], seq_lens[0]), "shared blocks must be full and cached"
        prefix = rows[0][:n_shared] if n_shared else []
        rows.append(prefix + [free.pop() for _ in range(n - n_shared)])
    # Entries past a request's last block hold arbitrary (valid) block ids: never read.
    block_tables = torch.randint(
        0, num_blocks, (len(rows), max(num_blocks_per_req) + 2), generator=gen, dtype=torch.int32
    )
    for i, row in enumerate(rows):
        block_tables[i, : len(row)] = torch.tensor(row, dtype=torch.int32)

    def slot(i: int, pos: int) -> int:
        return rows[i][pos // bs] * bs + pos % bs

    used = torch.zeros(num_blocks * bs, dtype=torch.bool)
    for i, s in enumerate(seq_lens):
        used[[slot(i, p) for p in range(s)]] = True
    new_slots = [slot(i, p) for i in range(len(rows)) for p in range(prior[i], seq_lens[i])]

    cache_shape = (num_blocks, bs, shape.num_kv_heads, shape.head_dim)
    k_clean = torch.randn(cache_shape, generator=gen).to(shape.dtype)
    v_clean = torch.randn(cache_shape, generator=gen).to(shape.dtype)
    k_cache, v_cache = k_clean.clone(), v_clean.clone()
    k_cache.view(-1, shape.num_kv_heads, shape.head_dim)[~used] = float("nan")
    v_cache.view(-1, shape.num_kv_heads, shape.head_dim)[~used] = float("nan")

    starts = [0]
    for q in q_lens:
        starts.append(starts[-1] + q)
    query = torch.randn(starts[-1], shape.num_q_heads, shape.head_dim, generator=gen)
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        block_tables=block_tables.to(device),
        slot_mapping=torch.tensor(new_slots, dtype=torch.int64, device=device),
        max_query_len=max(q_lens),
        max_seq_len=max(seq_lens),
        query_start_loc_host=starts,
        seq_lens_host=seq_lens,
    )
    return Batch(
        query=query.to(shape.dtype).to(device),
        k_cache=k_cache.to(device),
        v_cache=v_cache.to(device),
        k_clean=k_clean.to(device),
        v_clean=v_clean.to(device),
        meta=meta,
        spec=AttentionSpec(shape.head_dim**-0.5),
    )


def reference(batch: Batch) -> torch.Tensor:
    """The torch backend in fp32 on the same (rounded) inputs."""
    return TorchAttentionBackend().forward(
        batch.query.float(), batch.k_clean.float(), batch.v_clean.float(), batch.meta, batch.spec
    )


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, seed: int) -> None:
    assert out.shape == ref.shape
    out = out.float().to(ref.device)
    assert torch.isfinite(out).all(), f"non-finite output (seed {seed})"
    err = ((out - ref).abs().max() / ref.abs().max()).item()
    tol = TOLERANCE[dtype]
    assert err < tol, f"relative error {err:.2e} >= {tol:.0e} (seed {seed})"


def scenario(name: str, rng: random.Random, block_size: int):
    """(prior, q_lens, shared) for a named batch mix, with random lengths."""
    bs = block_size
    if name == "prefill":  # ragged prompts, nothing cached yet
        q = [rng.randint(1, 48) for _ in range(4)]
        return [0] * 4, q, None
    if name == "decode":
        return [rng.randint(0, 90) for _ in range(5)], [1] * 5, None
    if name == "long_decode":
        return [rng.randint(100, 300) for _ in range(3)], [1] * 3, None
    if name == "chunked":  # later chunks of prompts whose first chunks are cached
        return [rng.randint(1, 60) for _ in range(3)], [rng.randint(2, 33) for _ in range(3)], None
    if name == "mixed":  # a new prompt, a later chunk, three decodes, one idle request
        prior = [0, rng.randint(1, 50), rng.randint(0, 80), rng.randint(0, 80), rng.randint(0, 80)]
        q = [rng.randint(2, 40), rng.randint(2, 30), 1, 1, 1]
        prior.append(rng.randint(1, 20))
        q.append(0)
        return prior, q, None
    if name == "shared":  # requests 1 and 2 reuse request 0's first blocks
        prior = [0, rng.randint(2 * bs, 2 * bs + 20), rng.randint(bs, 3 * bs)]
        q = [rng.randint(2 * bs, 3 * bs + 5), rng.randint(1, 12), 1]
        return prior, q, {1: 2, 2: 1}
    raise ValueError(name)


# A layer's spec, by name; "sinks": True draws each head's sink logit.
SPECS = {
    "plain": {},
    "window": {"window": 5},  # shorter than most prompts, within one key tile
    "wide_window": {"window": 40},  # longer than some prompts, across blocks and key tiles
    "softcap": {"softcap": 2.0},
    "sinks": {"sinks": True},
    "all": {"window": 24, "softcap": 5.0, "sinks": True},
}
# The widest key tile tile_config picks: a kernel may read (and mask) fewer keys than
# this before a window, rounding down to a tile's start, but no more.
MAX_BLOCK_N = 64


def with_spec(batch: Batch, name: str, seed: int) -> Batch:
    """``batch`` attended as spec ``name`` says; with a window, every slot that no query
    of its request may read holds NaN in the caches the kernel reads."""
    kwargs = dict(SPECS[name])
    num_q_heads = batch.query.shape[1]
    if kwargs.pop("sinks", False):
        gen = torch.Generator().manual_seed(seed + 1)
        kwargs["sinks"] = 2 * torch.randn(num_q_heads, generator=gen).to(batch.query.device)
    spec = AttentionSpec(batch.spec.scale, **kwargs)
    if spec.window is not None:
        meta, bs = batch.meta, batch.k_cache.shape[1]
        k_cache, v_cache = batch.k_cache.clone(), batch.v_cache.clone()
        for i, seq_len in enumerate(meta.seq_lens_host):
            q_len = meta.query_start_loc_host[i + 1] - meta.query_start_loc_host[i]
            unread = spec.first_key(seq_len - q_len) - MAX_BLOCK_N
            for pos in range(max(0, unread)):
                block = int(meta.block_tables[i, pos // bs])
                k_cache[block, pos % bs] = v_cache[block, pos % bs] = float("nan")
        batch = replace(batch, k_cache=k_cache, v_cache=v_cache)
    return replace(batch, spec=spec)


def check_scenario(
    device: torch.device, seed: int, shape: Shape, name: str, splits: int, spec: str = "plain"
) -> None:
    """The Triton backend equals the reference on a batch of scenario ``name``."""
    batch = make_batch(seed, device, shape, *scenario(name, random.Random(seed), shape.block_size))
    batch = with_spec(batch, spec, seed)
    out = TritonAttentionBackend(num_splits=splits).forward(
        batch.query, batch.k_cache, batch.v_cache, batch.meta, batch.spec
    )
    assert out.dtype == shape.dtype
    assert_close(out, reference(batch), shape.dtype, seed)


ATTENTION_CASES = [
    # scenario, kv heads, group, head dim, block size, dtype
    ("prefill", 2, 1, 64, 16, "fp32"),
    ("prefill", 1, 4, 128, 8, "fp32"),
    ("decode", 2, 2, 128, 16, "fp32"),
    ("decode", 2, 4, 64, 8, "fp32"),
    ("chunked", 2, 1, 128, 8, "fp32"),
    ("mixed", 2, 2, 64, 16, "fp32"),
    ("mixed", 1, 4, 128, 16, "fp32"),
    ("mixed", 2, 3, 80, 16, "fp32"),  # a group and a head dim that are not powers of two
    ("shared", 2, 2, 64, 16, "fp32"),
    ("shared", 1, 4, 128, 8, "bf16"),
    ("decode", 1, 4, 128, 16, "fp16"),
    ("decode", 2, 2, 64, 16, "bf16"),
    ("chunked", 2, 2, 128, 16, "bf16"),
    ("mixed", 2, 4, 128, 16, "fp16"),
    ("mixed", 2, 1, 64, 8, "bf16"),
]


@pytest.mark.parametrize(
    "name,kv_heads,group,head_dim,block_size,dtype",
    ATTENTION_CASES,
    ids=["-".join(map(str, c)) for c in ATTENTION_CASES],
)
def test_attention_matches_reference(
    device, seed, name, kv_heads, group, head_dim, block_size, dtype
):
    shape = Shape(kv_heads, group, head_dim, block_size, DTYPES[dtype])
    check_scenario(device, seed, shape, name, splits=1)


SPLIT_CASES = [
    # scenario, kv heads, group, head dim, block size, dtype, splits
    ("long_decode", 2, 1, 64, 16, "fp32", 3),
    ("long_decode", 1, 4, 128, 16, "bf16", 16),  # most splits empty at these lengths
    ("long_decode", 2, 2, 128, 8, "fp16", 5),
    ("decode", 2, 4, 64, 16, "fp32", 2),  # short contexts: the second split is often empty
    ("mixed", 2, 2, 64, 16, "fp32", 4),  # the kernel splits prefill tiles too
]


@pytest.mark.parametrize(
    "name,kv_heads,group,head_dim,block_size,dtype,splits",
    SPLIT_CASES,
    ids=["-".join(map(str, c)) for c in SPLIT_CASES],
)
def test_split_kv_matches_reference(
    device, seed, name, kv_heads, group, head_dim, block_size, dtype, splits
):
    shape = Shape(kv_heads, group, head_dim, block_size, DTYPES[dtype])
    check_scenario(device, seed, shape, name, splits)


SPEC_CASES = [
    # spec, scenario, kv heads, group, block size, dtype, splits
    ("window", "mixed", 2, 2, 8, "fp32", 1),
    ("window", "mixed", 2, 2, 8, "fp32", 3),  # splits of a window: some see nothing
    ("wide_window", "mixed", 1, 4, 16, "fp32", 1),
    ("wide_window", "long_decode", 1, 4, 16, "fp32", 4),
    ("softcap", "mixed", 2, 2, 16, "fp32", 1),  # split, only with the others ("all")
    ("sinks", "mixed", 2, 2, 16, "fp32", 1),
    ("sinks", "decode", 1, 4, 8, "fp32", 3),  # a sink in every split would count 3 times
    ("all", "mixed", 2, 2, 8, "fp32", 1),
    ("all", "mixed", 1, 4, 16, "fp32", 4),
    ("all", "long_decode", 2, 2, 16, "bf16", 8),  # most splits see nothing
    ("all", "chunked", 1, 4, 8, "fp16", 1),
]


@pytest.mark.parametrize(
    "spec,name,kv_heads,group,block_size,dtype,splits",
    SPEC_CASES,
    ids=["-".join(map(str, c)) for c in SPEC_CASES],
)
def test_layer_spec_matches_reference(
    device, seed, spec, name, kv_heads, group, block_size, dtype, splits
):
    """Sliding windows, soft-capped scores and attention sinks, alone and together, on
    prefill chunks and decodes in one batch, with GQA, unsplit and split."""
    check_scenario(
        device, seed, Shape(kv_heads, group, 64, block_size, DTYPES[dtype]), name, splits, spec
    )


@pytest.mark.parametrize("splits,spec", [(1, "plain"), (4, "plain"), (4, "all")])
def test_padded_decode_rows_read_and_write_nothing(device, seed, splits, spec):
    """What a CUDA graph of a larger batch does with the rows it pads a step with: context
    length 0 and slot -1 give zero output and leave the cache as it was, and the real
    rows' results do not change."""
    shape = Shape(2, 4, 64, 16, torch.float32)
    batch = make_batch(seed, device, shape, *scenario("decode", random.Random(seed), 16))
    batch = with_spec(batch, spec, seed)
    real, pad = batch.meta.num_reqs, 3
    meta = batch.meta
    padded = AttentionMetadata(
        query_start_loc=torch.arange(real + pad + 1, dtype=torch.int32, device=device),
        seq_lens=torch.cat([meta.seq_lens, meta.seq_lens.new_zeros(pad)]),
        block_tables=torch.cat([meta.block_tables, meta.block_tables[:pad] * 0]),
        slot_mapping=torch.cat([meta.slot_mapping, meta.slot_mapping.new_full((pad,), -1)]),
        max_query_len=1,
        max_seq_len=meta.max_seq_len,
        query_start_loc_host=list(range(real + pad + 1)),
        seq_lens_host=meta.seq_lens_host + [0] * pad,
    )
    query = torch.cat([batch.query, torch.randn_like(batch.query[:pad])])
    backend = TritonAttentionBackend(num_splits=splits)
    k_before, v_before = batch.k_cache.clone(), batch.v_cache.clone()
    kv = torch.randn(pad, shape.num_kv_heads, shape.head_dim, device=device)
    backend.write_kv(kv, kv, batch.k_cache, batch.v_cache, padded.slot_mapping[real:])
    assert torch.equal(batch.k_cache.nan_to_num(), k_before.nan_to_num())
    assert torch.equal(batch.v_cache.nan_to_num(), v_before.nan_to_num())
    out = backend.forward(query, batch.k_cache, batch.v_cache, padded, batch.spec)
    assert_close(out[:real], reference(batch), shape.dtype, seed)
    assert torch.equal(out[real:].cpu(), torch.zeros_like(out[real:].cpu()))


def test_split_choice_uses_only_host_bounds():
    # Few long decodes on a large GPU: split, at most MAX_SPLITS ways.
    assert (
        choose_num_splits(
            max_query_len=1, max_seq_len=8192, num_reqs=1, num_kv_heads=8, num_compute_units=132
        )
        == 16
    )
    assert (
        1
        < choose_num_splits(
            max_query_len=1, max_seq_len=8192, num_reqs=8, num_kv_heads=8, num_compute_units=132
        )
        < 16
    )
    # 512 keys: 128 programs split in two, 256 do not (timed on an H100).
    decode_512 = dict(max_query_len=1, max_seq_len=512, num_kv_heads=4, num_compute_units=132)
    assert choose_num_splits(num_reqs=32, **decode_512) == 2
    assert choose_num_splits(num_reqs=64, **decode_512) == 1
    # Enough programs already, short contexts, or any prefill: no split.
    for kwargs in (
        dict(max_query_len=1, max_seq_len=8192, num_reqs=128, num_kv_heads=8),
        dict(max_query_len=1, max_seq_len=300, num_reqs=1, num_kv_heads=8),
        dict(max_query_len=7, max_seq_len=8192, num_reqs=1, num_kv_heads=8),
    ):
        assert choose_num_splits(num_compute_units=132, **kwargs) == 1
    # A sliding window leaves a long decode only its window's keys to split.
    long_decode = dict(max_query_len=1, max_seq_len=8192, num_reqs=1, num_kv_heads=8)
    assert choose_num_splits(num_compute_units=132, window=128, **long_decode) == 1
    assert choose_num_splits(num_compute_units=132, window=1024, **long_decode) == 4
    assert choose_num_splits(num_compute_units=132, window=16384, **long_decode) == 16


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("kv_heads,head_dim", [(2, 64), (3, 128)])
def test_write_kv_matches_reference(device, seed, dtype, kv_heads, head_dim):
    gen = torch.Generator().manual_seed(seed)
    num_blocks, block_size, num_tokens = 6, 8, 20
    cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen).to(DTYPES[dtype])
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]
    slots[torch.randperm(num_tokens, generator=gen)[:5]] = -1
    # Views into a fused projection output, as the model passes them: strided tokens.
    kv = torch.randn(num_tokens, 2 * kv_heads * head_dim + 8, generator=gen).to(DTYPES[dtype])
    width = kv_heads * head_dim
    key = kv[:, :width].view(num_tokens, kv_heads, head_dim)
    value = kv[:, width : 2 * width].view(num_tokens, kv_heads, head_dim)

    k_ref, v_ref = cache.clone(), cache.clone()
    TorchAttentionBackend().write_kv(key, value, k_ref, v_ref, slots)
    k_out, v_out = cache.clone().to(device), cache.clone().to(device)
    TritonAttentionBackend().write_kv(
        key.to(device), value.to(device), k_out, v_out, slots.to(device)
    )
    assert torch.equal(k_out.cpu(), k_ref), f"seed {seed}"
    assert torch.equal(v_out.cpu(), v_ref), f"seed {seed}"


@pytest.mark.parametrize("dtype,splits", [("fp32", None), ("bf16", 2)])
def test_steps_write_then_attend(device, seed, dtype, splits):
    """Chunked prefill, a late joiner and decodes, each step writing K/V then attending.

    Both backends run every step on their own caches; both caches and outputs agree.
    """
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    torch_dtype = DTYPES[dtype]
    kv_heads, group, head_dim, block_size, num_blocks = 2, 2, 64, 8, 24
    tables = torch.randperm(num_blocks, generator=gen)[:18].view(2, 9).to(torch.int32)
    prompt_a, prompt_b = rng.randint(25, 40), rng.randint(3, 12)
    # Each step: per request (cached tokens, new tokens); request B joins at step 2.
    steps = [
        [(0, 20)],
        [(20, prompt_a - 20), (0, prompt_b)],
        [(prompt_a, 1), (prompt_b, 1)],
        [(prompt_a + 1, 1), (prompt_b + 1, 1)],
    ]
    shape = (num_blocks, block_size, kv_heads, head_dim)
    ref_k = torch.zeros(shape, dtype=torch_dtype)
    ref_v = torch.zeros(shape, dtype=torch_dtype)
    tri_k, tri_v = ref_k.clone().to(device), ref_v.clone().to(device)
    ref_backend, tri_backend = create_backend("torch"), TritonAttentionBackend(num_splits=splits)
    assert isinstance(create_backend("triton"), TritonAttentionBackend)

    for step in steps:
        starts, seq_lens, slots = [0], [], []
        for i, (cached, new) in enumerate(step):
            starts.append(starts[-1] + new)
            seq_lens.append(cached + new)
            slots += [
                int(tables[i, p // block_size]) * block_size + p % block_size
                for p in range(cached, cached + new)
            ]
        num_tokens = starts[-1]
        query = torch.randn(num_tokens, kv_heads * group, head_dim, generator=gen).to(torch_dtype)
        key = torch.randn(num_tokens, kv_heads, head_dim, generator=gen).to(torch_dtype)
        value = torch.randn(num_tokens, kv_heads, head_dim, generator=gen).to(torch_dtype)
        meta_args = dict(
            max_query_len=max(n for _, n in step),
            max_seq_len=max(seq_lens),
            query_start_loc_host=starts,
            seq_lens_host=seq_lens,
        )

        ref_meta, tri_meta = (
            AttentionMetadata(
                query_start_loc=torch.tensor(starts, dtype=torch.int32, device=dev),
                seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev),
                block_tables=tables[: len(step)].to(dev),
                slot_mapping=torch.tensor(slots, dtype=torch.int64, device=dev),
                **meta_args,
            )
            for dev in (torch.device("cpu"), device)
        )
        ref_backend.write_kv(key, value, ref_k, ref_v, ref_meta.slot_mapping)
        tri_backend.write_kv(key.to(device), value.to(device), tri_k, tri_v, tri_meta.slot_mapping)
        assert torch.equal(tri_k.cpu(), ref_k) and torch.equal(tri_v.cpu(), ref_v), f"seed {seed}"

        spec = AttentionSpec(head_dim**-0.5)
        ref = ref_backend.forward(query.float(), ref_k.float(), ref_v.float(), ref_meta, spec)
        out = tri_backend.forward(query.to(device), tri_k, tri_v, tri_meta, spec)
        assert_close(out, ref, torch_dtype, seed)
