"""What one step does with a request's recurrent state slot (torch-free: the scheduler makes
these, the runner carries them out)."""

from __future__ import annotations

from dataclasses import dataclass

NO_SLOT = -1


@dataclass(frozen=True)
class StateOps:
    """A request's share of a step in the recurrent state pool (``model/recurrent.py``).

    ``slot``: the live slot the step reads and writes. ``init``, before the step: None keeps
    the slot as the last step left it, ``NO_SLOT`` zeroes it (a sequence's start), another
    slot is copied into it (a checkpoint the prefix cache resumes from). ``save_at``: after
    that many of the step's tokens the state is copied into ``save_slot`` (a checkpoint at a
    block boundary); -1: no copy.
    """

    slot: int
    init: int | None = None
    save_at: int = -1
    save_slot: int = NO_SLOT
