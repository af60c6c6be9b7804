"""The per-step messages rank 0 broadcasts to the tensor-parallel workers.

A message is a fixed-size header (the command and its sizes), then one payload: a step's
flattened batch as one int64 tensor, or the hidden rows whose logits rank 0 needs.
"""

from __future__ import annotations

from itertools import accumulate

import torch

from llmkit.model.batch import StepBatch
from llmkit.model.parallel import TensorParallel

EXECUTE, LOGITS, STOP = 1, 2, 3
_HEADER = 5


class StepChannel:
    """Rank 0 calls the ``send_*`` methods; every other rank calls :meth:`receive` in step."""

    def __init__(self, tp: TensorParallel, dtype: torch.dtype):
        self.tp = tp
        self.dtype = dtype  # the hidden states'

    def _broadcast(self, x: torch.Tensor) -> torch.Tensor:
        assert self.tp.group is not None
        x = x.to(self.tp.device)
        self.tp.group.broadcast(x, 0).wait()
        return x

    def _header(self, *fields: int) -> torch.Tensor:
        values = [*fields, *[0] * (_HEADER - len(fields))]
        return self._broadcast(torch.tensor(values, dtype=torch.int64))

    def send_batch(self, batch: StepBatch) -> None:
        tables = batch.block_tables
        width = len(tables[0]) if tables else 0
        self._header(EXECUTE, len(batch.input_ids), len(batch.seq_lens), width, batch.groups)
        flat = [
            *batch.input_ids,
            *batch.positions,
            *batch.slot_mapping,
            *batch.query_start_loc,
            *batch.seq_lens,
            *(b for row in tables for b in row),
        ]
        self._broadcast(torch.tensor(flat, dtype=torch.int64))

    def send_rows(self, hidden: torch.Tensor) -> None:
        self._header(LOGITS, *hidden.shape)
        self._broadcast(hidden.contiguous())

    def send_stop(self) -> None:
        self._header(STOP)

    def receive(self) -> tuple[int, StepBatch | torch.Tensor | None]:
        """The next command and what it carries (nothing for STOP)."""
        cmd, a, b, c, groups = self._broadcast(torch.zeros(_HEADER, dtype=torch.int64)).tolist()
        if cmd == LOGITS:
            return cmd, self._broadcast(torch.empty(a, b, dtype=self.dtype))
        if cmd != EXECUTE:
            return cmd, None
        num_tokens, num_seqs, width = a, b, c
        # Slots and block tables: each KV cache group's in turn.
        sizes = [num_tokens, num_tokens, groups * num_tokens, num_seqs + 1, num_seqs]
        size = sum(sizes) + groups * num_seqs * width
        flat = self._broadcast(torch.empty(size, dtype=torch.int64)).tolist()
        ends = list(accumulate(sizes))
        ids, pos, slots, starts, lens = (flat[a:b] for a, b in zip([0, *ends], ends))
        rest = flat[ends[-1] :]
        tables = [rest[i * width : (i + 1) * width] for i in range(groups * num_seqs)]
        return cmd, StepBatch(ids, pos, slots, starts, lens, tables, groups=groups)
