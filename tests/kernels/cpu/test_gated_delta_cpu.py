"""The gated delta rule's C kernel and torch reference against transformers' own recurrences:
ragged sequences in slots of a pool, grouped heads, strided inputs, checkpoints."""

from __future__ import annotations

import pytest
import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import (
    torch_chunk_gated_delta_rule,
    torch_recurrent_gated_delta_rule,
)

from llmkit.model.layers import gated_delta_cpu
from llmkit.model.layers.gated_delta_cpu import gated_delta, gated_delta_torch

LENGTHS = [1, 5, 63, 1, 130]


def _reference(q, k, v, g, beta, state):
    """transformers' result for one sequence ([n, H, D] inputs): outputs and final state."""
    fn = torch_recurrent_gated_delta_rule if q.shape[0] == 1 else torch_chunk_gated_delta_rule
    out, final = fn(
        q[None], k[None], v[None], g[None], beta[None],
        initial_state=state[None].clone(), output_final_state=True, use_qk_l2norm_in_kernel=True,
    )  # fmt: skip
    return out[0], final[0]


@pytest.mark.parametrize("impl", ["c", "torch"])
@pytest.mark.parametrize(("hk", "hv", "dk", "dv"), [(2, 4, 16, 8), (3, 3, 32, 32)])
def test_ragged_sequences_in_their_slots_match_transformers(impl, hk, hv, dk, dv):
    if impl == "c" and gated_delta_cpu.load() is None:
        pytest.skip("the C kernel does not build here")
    fn = gated_delta if impl == "c" else gated_delta_torch
    torch.manual_seed(0)
    rows = sum(LENGTHS)
    # q and k as views into one projection's rows, as the layer hands them over.
    mixed = torch.randn(rows, 2 * hk * dk + hv * dv + 3)
    q = mixed[:, : hk * dk].view(rows, hk, dk)
    k = mixed[:, hk * dk : 2 * hk * dk].view(rows, hk, dk)
    v = mixed[:, 2 * hk * dk : 2 * hk * dk + hv * dv].view(rows, hv, dv)
    g = -torch.rand(rows, hv) * 2
    beta = torch.rand(rows, hv)
    pool = torch.randn(9, hv, dk, dv) * 0.3
    before = pool.clone()
    slots = torch.tensor([4, 0, 7, 2, 5])
    starts = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()])
    save_at = torch.tensor([-1, 0, 30, 1, 130])  # none, before any token, mid, after the last
    save_slot = torch.tensor([-1, 1, 3, 6, 8])
    out = fn(q, k, v, g, beta, pool, slots, starts, save_at, save_slot)
    for b in range(len(LENGTHS)):
        first, last = starts[b].item(), starts[b + 1].item()
        span = slice(first, last)
        want, final = _reference(q[span], k[span], v[span], g[span], beta[span], before[slots[b]])
        # GQA as HF: consecutive value heads share a key head.
        torch.testing.assert_close(out[span], want, atol=2e-4, rtol=1e-4)
        torch.testing.assert_close(pool[slots[b]], final, atol=2e-4, rtol=1e-4)
        at = save_at[b].item()
        if at >= 0:
            cut = slice(first, first + at)
            if at == 0:
                saved = before[slots[b]]
            else:
                _, saved = _reference(q[cut], k[cut], v[cut], g[cut], beta[cut], before[slots[b]])
            torch.testing.assert_close(pool[save_slot[b]], saved, atol=2e-4, rtol=1e-4)
