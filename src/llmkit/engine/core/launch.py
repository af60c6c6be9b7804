"""Launching a step: its inputs, the forward, logits and sampling queued on the device, and
what the host needs to read its tokens later (a step later with async scheduling)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from llmkit.config import EngineConfig
from llmkit.engine.core.encoder_cache import EncoderCache
from llmkit.engine.core.prompt_cache import move_blocks
from llmkit.engine.core.sample_batch import SampleBatch, plain_sample_batch
from llmkit.engine.core.seq_state import SeqState
from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request
from llmkit.engine.sched.scheduler import Scheduler, SchedulerOutput
from llmkit.engine.sched.step_rows import ReportedPromptLogprobs, StepRows, plan_rows
from llmkit.model.runner import ModelRunner
from llmkit.model.sampler import Sampled, Sampler
from llmkit.model.transfer import take_rows

if TYPE_CHECKING:  # imported only where speculation is configured
    from llmkit.engine.core.spec.decoder import SpeculativeDecoder

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class Launched:
    """A step queued on the device: what its tokens mean once the host reads them."""

    sched: SchedulerOutput
    plan: StepRows
    logits: torch.Tensor | None  # kept for prompt logprobs only
    batch: SampleBatch | None = None
    sampled: Sampled | None = None
    rows: dict[Request, int] = field(default_factory=dict)  # each request's sampled row
    hidden: torch.Tensor | None = None  # kept for pooling

    @property
    def must_finish_now(self) -> bool:
        """Pooling reads hidden rows that the next step's CUDA graph may overwrite."""
        return bool(self.plan.pool)


@dataclass
class Launcher:
    """The core's parts a launch uses; ``launch`` waits for nothing on the device."""

    runner: ModelRunner
    sampler: Sampler
    scheduler: Scheduler
    allocator: BlockAllocator
    encoder: EncoderCache
    spec: SpeculativeDecoder | None

    def launch(
        self,
        sched: SchedulerOutput,
        seqs: dict[Request, SeqState],
        reported: ReportedPromptLogprobs,
        prev: Launched | None,
    ) -> Launched:
        """Queue ``sched``'s forward and sampling. ``prev``: the step in flight, whose
        tokens (on the device) are the last inputs of the requests it sampled."""
        moves = self.allocator.take_moves()  # before the forward that overwrites the saved
        if moves:
            assert self.allocator.tiers is not None
            move_blocks(self.runner, self.allocator.tiers, moves)
        started = time.perf_counter()
        inputs = self.encoder.seq_inputs(sched.requests, sched.num_new_tokens, self.allocator)
        for req, seq_input in zip(sched.requests, inputs):
            seq_input.lora = seqs[req].lora
            if req.num_output_placeholders:
                assert prev is not None, "a token is in flight but no step is"
                seq_input.in_flight_row = prev.rows[req]
        if self.spec is not None:
            self.spec.fill(sched.requests, inputs, seqs)
            inputs = self.spec.expand(sched.requests, inputs)
        in_flight = prev.sampled.token_ids if prev is not None and prev.sampled else None
        hidden = self.runner.execute(inputs, in_flight)
        if sched.total_tokens > 2 * len(sched.requests):  # mostly prompt: the prefill's speed
            self.allocator.tier_stats.time_step(time.perf_counter() - started, sched.total_tokens)
        plan = plan_rows(sched, reported)
        staging = self.runner.staging
        logits = (
            self.runner.compute_logits(take_rows(hidden, plan.rows, staging)) if plan.rows else None
        )
        self.scheduler.advance(sched)
        # The logits outlive the launch only for prompt logprobs: at 256 rows of a 152k
        # vocabulary they are 155 MB, which a step in flight would otherwise hold.
        launched = Launched(sched, plan, logits if plan.prompt_logprobs else None)
        if plan.pool:
            launched.hidden = hidden
        if plan.sample:
            assert logits is not None
            b = launched.batch = (
                self.spec.sample_batch(plan.sample, seqs)
                if self.spec is not None
                else plain_sample_batch(plan.sample, seqs)
            )
            rows = take_rows(logits, b.logit_rows, staging)
            launched.sampled = self.sampler.sample(rows, b.rows, b.drafts, b.draft_probs)
            for (req, _), (first, _) in zip(plan.sample, b.spans):
                req.num_output_placeholders += 1
                launched.rows[req] = first
        return launched


def resolve_async_scheduling(
    config: EngineConfig, device: torch.device, *, speculative: bool
) -> bool:
    """``async_scheduling``; auto (None) is on for CUDA, where the host would otherwise leave
    the GPU idle while it prepares each step, and off on CPU, where the host's step work
    and the model's share the same cores. Speculative decoding checks each step's proposals
    on the host before the next step, so it runs steps one at a time."""
    if config.async_scheduling is None:
        return device.type == "cuda" and not speculative
    if config.async_scheduling and speculative:
        logger.info("speculative decoding runs steps one at a time: async scheduling is off")
        return False
    return config.async_scheduling
