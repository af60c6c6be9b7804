"""Staging: a step's host <-> device copies, through pinned slots on CUDA, plain on CPU."""

from __future__ import annotations

import random

import pytest
import torch

from llmkit.model.transfer import Staging, scatter_in_flight, take_rows


def test_tokens_in_flight_are_written_into_their_rows():
    staging = Staging(torch.device("cpu"))
    ids = torch.tensor([5, 0, 7, 0])
    scatter_in_flight(ids, [(1, 2), (3, 0)], torch.tensor([11, 12, 13]), staging)
    assert ids.tolist() == [5, 13, 7, 11]
    scatter_in_flight(ids, [], None, staging)  # nothing in flight: nothing to read


def test_take_rows_skips_the_gather_only_for_every_row_in_order():
    staging = Staging(torch.device("cpu"))
    t = torch.arange(8).view(4, 2)
    assert take_rows(t, [0, 1, 2, 3], staging) is t
    assert take_rows(t, [1, 3], staging).tolist() == [[2, 3], [6, 7]]
    assert take_rows(t, [3, 2, 1, 0], staging).tolist() == t.flip(0).tolist()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_pinned_slots_carry_every_steps_values_both_ways():
    """Steps of random sizes, some past the slot's size (it grows), and each step's host
    copy read two steps later, as the core reads a step in flight."""
    rng = random.Random(0)
    staging = Staging(torch.device("cuda"), slot_bytes=256)
    pending: list[tuple[torch.Tensor, list[int], torch.cuda.Event]] = []
    for _ in range(12):
        staging.next_step()
        values = [rng.randrange(-(2**40), 2**40) for _ in range(rng.choice([1, 7, 40, 300]))]
        flags = [rng.random() < 0.5 for _ in range(rng.randrange(1, 9))]
        on_device = staging.to_device(values, torch.int64)
        assert staging.to_device(flags, torch.bool).cpu().tolist() == flags
        host = staging.to_host(on_device * 2)
        done = torch.cuda.Event()
        done.record()
        pending.append((host, [2 * v for v in values], done))
        if len(pending) > 2:
            host, want, done = pending.pop(0)
            done.synchronize()
            assert host.tolist() == want
