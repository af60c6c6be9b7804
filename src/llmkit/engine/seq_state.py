"""SeqState: what the core keeps for one sequence besides the scheduler's Request."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmkit.engine.output_state import RequestState
from llmkit.model.lora_adapter import LoRAAdapter
from llmkit.model.pooler import PoolingAccumulator


@dataclass(eq=False)
class SeqState:
    """A sequence's user request, and what its steps need beyond its tokens."""

    state: RequestState  # the user request it belongs to
    generator: torch.Generator | None = None  # seeded sampling
    pooler: PoolingAccumulator | None = None  # pooling requests
    lora: LoRAAdapter | None = None  # the LoRA adapter it runs with
