"""SeqState: what the core keeps for one sequence besides the scheduler's Request."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmkit.engine.core.output_state import RequestState
from llmkit.engine.sched.request import Request
from llmkit.model.lora_adapter import LoRAAdapter
from llmkit.model.pooler import PoolingAccumulator
from llmkit.model.sampler import SamplingRow


@dataclass(eq=False)
class SeqState:
    """A sequence's user request, and what its steps need beyond its tokens."""

    state: RequestState  # the user request it belongs to
    generator: torch.Generator | None = None  # seeded sampling
    pooler: PoolingAccumulator | None = None  # pooling requests
    lora: LoRAAdapter | None = None  # the LoRA adapter it runs with

    @classmethod
    def build(
        cls,
        state: RequestState,
        req: Request,
        lora: LoRAAdapter | None,
        device: torch.device,
        pooling_type: str,
    ) -> SeqState:
        """The sequence's seeded generator and pooler made (``pooling_type``: the model's,
        for a request that names none); raises what a bad seed or pooling type raises."""
        seq = cls(state, lora=lora)
        params = req.sampling_params
        if params is not None and params.seed is not None:
            seq.generator = torch.Generator(device=device)
            seq.generator.manual_seed(params.seed)
        if req.pooling_params is not None:
            seq.pooler = PoolingAccumulator(req.pooling_params.pooling_type or pooling_type)
        return seq

    def sampling_row(self, req: Request) -> SamplingRow:
        """What the sampler needs of ``req``, this sequence's request, for one step."""
        assert req.sampling_params is not None
        return SamplingRow(
            params=req.sampling_params,
            prompt_token_ids=req.prompt_token_ids,
            output_token_ids=req.output_token_ids,
            eos_token_id=req.eos_token_id,
            generator=self.generator,
            matcher=req.matcher,
        )
