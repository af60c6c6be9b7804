"""A step's sequences, and the same flattened into one batch without padding."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from llmkit.model.lora_adapter import LoRAAdapter
from llmkit.model.state_ops import StateOps


@dataclass
class SeqInput:
    """One request's share of a step: ``token_ids`` from position ``start``, KV in ``block_ids``.

    ``images``: (offset into ``token_ids``, embedding rows) that replace placeholder tokens.
    ``in_flight_row``: with async scheduling, the row of the previous step's sampled tokens
    (still on the device) that is this sequence's last input token; -1: all are known.
    ``group_block_ids``: the blocks of every KV cache group after the first
    (``model/kv_layout.py``), where a windowed group's passed blocks are ``-1``.
    ``state``: a hybrid model's work on the sequence's recurrent state slot.
    """

    token_ids: list[int]
    start: int
    block_ids: list[int]
    images: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    lora: LoRAAdapter | None = None
    in_flight_row: int = -1
    group_block_ids: list[list[int]] = field(default_factory=list)
    state: StateOps | None = None


@dataclass
class StepBatch:
    """A step's tokens flattened without padding (host lists; tables are ``[B, width]``).

    With several KV cache groups, ``slot_mapping`` and ``block_tables`` hold each group's
    in turn: ``[groups * T]`` and ``[groups * B, width]``.
    """

    input_ids: list[int]
    positions: list[int]
    slot_mapping: list[int]
    query_start_loc: list[int]
    seq_lens: list[int]
    block_tables: list[list[int]]
    # (flat index, row of the previous step's sampled tokens) for each input token in flight
    in_flight: list[tuple[int, int]] = field(default_factory=list)
    groups: int = 1
    states: list[StateOps | None] = field(default_factory=list)  # a hybrid's, per sequence


def flatten(seqs: list[SeqInput], bs: int) -> StepBatch:
    """The step's sequences as one batch; ``bs`` is the KV cache's block size."""
    input_ids: list[int] = []
    positions: list[int] = []
    slots: list[int] = []
    starts = [0]
    seq_lens: list[int] = []
    in_flight: list[tuple[int, int]] = []
    for seq in seqs:
        n = len(seq.token_ids)
        if seq.in_flight_row >= 0:
            in_flight.append((starts[-1] + n - 1, seq.in_flight_row))
        input_ids += seq.token_ids
        positions += range(seq.start, seq.start + n)
        starts.append(starts[-1] + n)
        seq_lens.append(seq.start + n)
    groups = 1 + len(seqs[0].group_block_ids)
    width = max(len(s.block_ids) for s in seqs)  # 0 for an encoder, which has no blocks
    tables: list[list[int]] = []
    for g in range(groups):
        for seq, end in zip(seqs, seq_lens):
            blocks = seq.group_block_ids[g - 1] if g else seq.block_ids
            if blocks:
                slots += [blocks[p // bs] * bs + p % bs for p in range(seq.start, end)]
            # A windowed group's passed blocks (-1) lead its row; attention never reads them.
            row = [max(b, 0) for b in blocks] if blocks and blocks[0] < 0 else blocks
            tables.append(row + [0] * (width - len(row)))
    states = [seq.state for seq in seqs]
    return StepBatch(
        input_ids, positions, slots, starts, seq_lens, tables, in_flight, groups, states
    )
