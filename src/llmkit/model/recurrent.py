"""The recurrent state pool of a hybrid model's linear-attention layers, and a step's view of
it: which slot each sequence reads and writes, and where its checkpoint goes.

Each Gated DeltaNet layer keeps, per slot, the last ``kernel - 1`` inputs of its causal
convolution (``[kernel - 1, channels]``) and its delta-rule state (``[value heads, key dim,
value dim]``), float32 whatever the model's dtype (the state accumulates over the whole
context). The scheduler decides the slots (``engine/sched/state_cache.py``); the runner
applies a step's ``StateOps`` here before the layers run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmkit.config import EngineConfig
from llmkit.model.cpu_memory import zeroed
from llmkit.model.kv_blocks import write_rows
from llmkit.model.state_ops import NO_SLOT, StateOps


@dataclass(frozen=True)
class StateShape:
    """One linear-attention layer's state per slot."""

    conv: tuple[int, int]  # (kernel - 1, channels)
    recurrent: tuple[int, int, int]  # (value heads, key dim, value dim)

    @property
    def bytes(self) -> int:
        conv, rec = self.conv, self.recurrent
        return 4 * (conv[0] * conv[1] + rec[0] * rec[1] * rec[2])


@dataclass
class StepStates:
    """What a linear-attention layer reads of the step: its pools and the sequences' slots.

    ``slots`` ``[B]`` (and on the host); ``save_at`` / ``save_slot`` ``[B]``: after
    ``save_at[b]`` of sequence ``b``'s tokens its state is copied into ``save_slot[b]``
    (-1: no copy), or None when no sequence saves this step.
    """

    conv: list[torch.Tensor]  # per layer: [slots, kernel - 1, channels]
    recurrent: list[torch.Tensor]  # per layer: [slots, value heads, key dim, value dim]
    slots: torch.Tensor
    slots_host: list[int]
    save_at: torch.Tensor | None
    save_slot: torch.Tensor | None
    saves_host: list[tuple[int, int]]  # (save_at, save_slot) per sequence

    def select(self, reqs: list[int]) -> StepStates:
        """The view of sequences ``reqs`` alone."""
        saves = [self.saves_host[i] for i in reqs]
        saving = self.save_at is not None and any(at >= 0 for at, _ in saves)
        index = torch.tensor(reqs, device=self.slots.device)
        return StepStates(
            self.conv,
            self.recurrent,
            self.slots[index],
            [self.slots_host[i] for i in reqs],
            self.save_at[index] if saving and self.save_at is not None else None,
            self.save_slot[index] if saving and self.save_slot is not None else None,
            saves,
        )


class RecurrentStates:
    """``num_slots`` slots of every linear-attention layer's state."""

    def __init__(
        self, shapes: list[StateShape], num_slots: int, max_running: int, device: torch.device
    ) -> None:
        self.num_slots, self.max_running = num_slots, max_running
        self.nbytes = num_slots * sum(s.bytes for s in shapes)
        self.conv = [zeroed((num_slots, *s.conv), torch.float32, device) for s in shapes]
        self.recurrent = [zeroed((num_slots, *s.recurrent), torch.float32, device) for s in shapes]
        # States from the prompt cache's tiers, loaded by the next step after its copies.
        self.pending: list[tuple[int, bytes]] = []

    @property
    def pools(self) -> list[torch.Tensor]:
        """Every layer's convolution inputs, then every layer's state: a slot's row."""
        return [*self.conv, *self.recurrent]

    def _load_pending(self) -> None:
        slots, payloads = zip(*self.pending)
        self.pending = []
        write_rows(self.pools, list(slots), list(payloads))

    def describe(self) -> str:
        """For the log."""
        return (
            f"{self.num_slots} recurrent state slots of {self.nbytes // self.num_slots} bytes "
            f"({self.max_running} requests at once)"
        )

    @classmethod
    def for_model(
        cls, model: object, config: EngineConfig, budget: int, device: torch.device
    ) -> RecurrentStates | None:
        """The pool of ``model``'s linear-attention layers (None: it has none), sized from
        ``budget``, the KV cache's bytes (:func:`plan_state_slots`)."""
        shapes: list[StateShape] = getattr(model, "recurrent_state_shapes", [])
        if not shapes:
            return None
        slots, running = plan_state_slots(
            shapes, config.max_num_seqs, config.enable_prefix_caching, budget
        )
        return cls(shapes, slots, running, device)

    def step(self, ops: list[StateOps | None], device: torch.device) -> StepStates:
        """The step's view, after its sequences' slots are set up: checkpoints copied in
        (all read before any is written: a slot freed this step may be one's source and
        another's target), then fresh sequences' slots zeroed, then states from the prompt cache's
        tiers loaded."""
        missing = [i for i, op in enumerate(ops) if op is None]
        if missing:
            raise ValueError(f"sequences {missing} of a hybrid model's step have no state slot")
        done = [op for op in ops if op is not None]
        copies = [(op.init, op.slot) for op in done if op.init is not None and op.init != NO_SLOT]
        zeros = [op.slot for op in done if op.init == NO_SLOT]
        for pool in (*self.conv, *self.recurrent):
            if copies:
                src = torch.tensor([c[0] for c in copies], device=device)
                pool[torch.tensor([c[1] for c in copies], device=device)] = pool[src]
            if zeros:
                pool[torch.tensor(zeros, device=device)] = 0
        if self.pending:  # after the copies, which may read a slot a load then fills
            self._load_pending()
        slots = [op.slot for op in done]
        saves = [(op.save_at, op.save_slot) for op in done]
        saving = any(at >= 0 for at, _ in saves)
        return StepStates(
            self.conv,
            self.recurrent,
            torch.tensor(slots, dtype=torch.int64, device=device),
            slots,
            torch.tensor([s[0] for s in saves], dtype=torch.int64, device=device)
            if saving
            else None,
            torch.tensor([s[1] for s in saves], dtype=torch.int64, device=device)
            if saving
            else None,
            saves,
        )


def plan_state_slots(
    shapes: list[StateShape], max_num_seqs: int, prefix_caching: bool, budget: int
) -> tuple[int, int]:
    """(slots, the most requests that can run at once) for states of ``shapes`` in at most
    half of ``budget`` bytes (the KV cache's; the rest holds its blocks). A running request
    holds a live slot and, with prefix caching, a trailing checkpoint and room for one more
    (``engine/sched/state_cache.py``); at least one request always runs."""
    per_request = 3 if prefix_caching else 1
    per_slot = sum(s.bytes for s in shapes)
    running = min(max_num_seqs, max(1, budget // 2 // (per_slot * per_request)))
    return running * per_request, running
