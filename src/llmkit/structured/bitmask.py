"""Allowed-token bitmasks: allocate them for the matchers to fill, apply them to logits."""

from __future__ import annotations

import llguidance.numpy
import numpy as np
import torch
from numpy.typing import NDArray


def allocate_bitmask(num_rows: int, vocab_size: int) -> NDArray[np.int32]:
    """One row of int32 words per constrained sequence, every token allowed."""
    return llguidance.numpy.allocate_token_bitmask(num_rows, vocab_size)


def apply_bitmask(logits: torch.Tensor, bitmask: NDArray[np.int32]) -> None:
    """Set the logits of the tokens a row's bitmask disallows to -inf, in place.

    llguidance's own torch helper is a ``torch.compile`` kernel, which costs seconds to
    import and to compile on a CPU; a few vector ops do the same for a handful of rows.
    """
    vocab = logits.shape[-1]
    words = torch.from_numpy(bitmask).to(logits.device)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((words[:, :, None] >> shifts) & 1).bool().flatten(1)
    if allowed.shape[1] < vocab:
        logits[:, allowed.shape[1] :] = float("-inf")
    logits[:, : allowed.shape[1]].masked_fill_(~allowed[:, :vocab], float("-inf"))
