"""The sampler's input for a step: one row per sampling request (speculation adds more)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmkit.engine.core.seq_state import SeqState
from llmkit.engine.sched.request import Request
from llmkit.model.sampler import SamplingRow


@dataclass
class SampleBatch:
    """Rows, their logit rows and drafts, and each request's span of them."""

    rows: list[SamplingRow]
    logit_rows: list[int]
    drafts: list[int | None]
    spans: list[tuple[int, int]]
    draft_probs: torch.Tensor | None = None  # [rows, vocab]: a draft model's q, else None


def plain_sample_batch(
    sample: list[tuple[Request, int]], seqs: dict[Request, SeqState]
) -> SampleBatch:
    """One row per request, at its logit row ``first``; no drafts."""
    n = len(sample)
    return SampleBatch(
        rows=[seqs[req].sampling_row(req) for req, _ in sample],
        logit_rows=[first for _, first in sample],
        drafts=[None] * n,
        spans=[(i, i + 1) for i in range(n)],
    )
