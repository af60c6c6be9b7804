"""A step's sequences, and the same flattened into one batch without padding."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from llmkit.model.lora_adapter import LoRAAdapter


@dataclass
class SeqInput:
    """One request's share of a step: ``token_ids`` from position ``start``, KV in ``block_ids``.

    ``images``: (offset into ``token_ids``, embedding rows) that replace placeholder tokens.
    ``in_flight_row``: with async scheduling, the row of the previous step's sampled tokens
    (still on the device) that is this sequence's last input token; -1: all are known.
    """

    token_ids: list[int]
    start: int
    block_ids: list[int]
    images: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    lora: LoRAAdapter | None = None
    in_flight_row: int = -1


@dataclass
class StepBatch:
    """A step's tokens flattened without padding (host lists; tables are ``[B, width]``)."""

    input_ids: list[int]
    positions: list[int]
    slot_mapping: list[int]
    query_start_loc: list[int]
    seq_lens: list[int]
    block_tables: list[list[int]]
    # (flat index, row of the previous step's sampled tokens) for each input token in flight
    in_flight: list[tuple[int, int]] = field(default_factory=list)


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
        pos = range(seq.start, seq.start + n)
        positions += pos
        blocks = seq.block_ids
        if blocks:
            slots += [blocks[p // bs] * bs + p % bs for p in pos]
        starts.append(starts[-1] + n)
        seq_lens.append(seq.start + n)
    width = max(len(s.block_ids) for s in seqs)  # 0 for an encoder, which has no blocks
    tables = [s.block_ids + [0] * (width - len(s.block_ids)) for s in seqs]
    return StepBatch(input_ids, positions, slots, starts, seq_lens, tables, in_flight)
