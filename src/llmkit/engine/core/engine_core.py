"""EngineCore: one synchronous step at a time: schedule -> execute -> sample -> update."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from llmkit.config import EngineConfig
from llmkit.engine.core.encoder_cache import EncoderCache
from llmkit.engine.core.finish import StepFinisher
from llmkit.engine.core.launch import Launched, Launcher, resolve_async_scheduling
from llmkit.engine.core.lora_store import LoRAStore
from llmkit.engine.core.output_state import RequestState
from llmkit.engine.core.prompt_cache import move_blocks, open_tiers, tier_fields
from llmkit.engine.core.request_table import RequestTable
from llmkit.engine.core.resolve import resolve
from llmkit.engine.core.seq_state import SeqState
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.core.tokenizers import Tokenizers
from llmkit.engine.sched.admission import AdmissionQueue
from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.scheduler import Scheduler
from llmkit.executor.runner import create_runner
from llmkit.lora_request import LoRARequest
from llmkit.model.cpu_kernels import start_cpu_kernel_builds
from llmkit.model.device import resolve_device
from llmkit.model.lora_adapter import LoRAAdapter
from llmkit.model.sampler import Sampler
from llmkit.outputs import SpecDecodeCounts
from llmkit.types import EngineStats

if TYPE_CHECKING:  # imported only where speculation is configured
    from llmkit.engine.core.spec.decoder import SpeculativeDecoder

logger = logging.getLogger(__name__)


class EngineCore:
    """Owns the scheduler, the KV block allocator and the model; called from one thread.
    ``tokenizers``: where to take the tokenizer from (default: built here)."""

    def __init__(self, config: EngineConfig, tokenizers: Tokenizers | None = None):
        self.config = config
        if resolve_device(config).type == "cpu":  # the kernels compile while the model resolves
            start_cpu_kernel_builds()
        model = resolve(config)
        self.model_info = model.info
        self.pooling_config = model.pooling
        self.tokenizer = (tokenizers.get if tokenizers else Tokenizer)(model.info.tokenizer)
        self.max_model_len = model.info.max_model_len
        cfg = dataclasses.replace(config, max_num_batched_tokens=model.max_num_batched_tokens)
        runner = self.runner = create_runner(cfg, model.path, model.hf_config, self.max_model_len)
        prefix, windows = config.enable_prefix_caching, runner.kv_layout.windows
        states = runner.states.num_slots if runner.states else 0
        tiers = open_tiers(config, model.path, runner)  # the prompt cache below the pool
        self.allocator = BlockAllocator(
            runner.num_blocks, config.block_size, prefix, windows, states, tiers
        )
        self.scheduler = Scheduler(
            self.allocator,
            runner.max_running,
            model.max_num_batched_tokens,
            config.enable_chunked_prefill,
            encoder_only=model.info.is_encoder,
            max_loras=config.max_loras if config.enable_lora else 0,
        )
        self.loras = LoRAStore(self.runner.lora.layout if self.runner.lora else None)
        self.sampler = Sampler(
            model.info.vocab_size, self.runner.device, config.seed, self.runner.staging
        )
        self.encoder = EncoderCache(self.runner.embed_images)
        self.spec: SpeculativeDecoder | None = None
        if (spec := config.speculative_config) is not None:
            # Only here: an engine without speculation never loads the spec package.
            from llmkit.engine.core.spec.decoder import create_speculative_decoder

            blocks = self.runner.num_blocks
            self.spec = create_speculative_decoder(config, spec, model.info, self.tokenizer, blocks)
        self.async_scheduling = resolve_async_scheduling(
            config, self.runner.device, speculative=self.spec is not None
        )
        self.launcher = Launcher(
            self.runner, self.sampler, self.scheduler, self.allocator, self.encoder, self.spec
        )
        self._in_flight: Launched | None = None  # with async scheduling, the step queued
        self._steps = self._prompt_tokens = self._preemptions = 0
        # Reserved by callers before add(); released here when a request first runs.
        self.queue = AdmissionQueue(config.max_queued_requests, config.max_queued_tokens)
        self._table = RequestTable(self.scheduler, self.queue, self.encoder)
        self._seqs = self._table.seqs
        self.finisher = StepFinisher(
            self._table,
            self.scheduler,
            self.sampler,
            self.tokenizer,
            self.spec,
            self.max_model_len,
            self.pooling_config.normalize,
        )

    # ---- requests in and out -------------------------------------------------------

    def add(
        self, state: RequestState, requests: list[Request], lora: LoRAAdapter | None = None
    ) -> RequestState | None:
        """Queue a request whose place the caller reserved with ``queue.reserve``; ``lora``
        is the adapter its requests name (``loras.get``).

        All or nothing: everything that can fail runs before the request is registered, and
        a request that cannot be added ends at once with its error, holding nothing; its
        state is returned for the reader to learn that (None when it was queued).
        """
        try:
            if state.request_id in self._table.requests:
                raise ValueError(f"request id {state.request_id!r} is already running")
            device, pooling_type = self.runner.device, self.pooling_config.pooling_type
            seqs = [SeqState.build(state, req, lora, device, pooling_type) for req in requests]
        except Exception as exc:  # one bad request must not reach the scheduler
            logger.exception("request %s could not be added", state.request_id)
            self.queue.release(len(state.prompt_token_ids), None)
            with state.lock:
                state.error = f"the engine could not add the request: {exc}"
            state.mark_updated()
            return state
        self._table.add(state, requests, seqs)
        self._prompt_tokens += sum(req.num_prompt_tokens for req in requests)
        return None

    def check_admission(self) -> None:
        """Raise ``EngineOverloadedError`` if a new request would be refused now; any thread."""
        self.queue.check()

    def reserve(self, num_prompt_tokens: int, refuse: bool = True) -> None:
        """Take a queue place for a request before ``add`` (``refuse=False``: past the
        limits, as an offline batch does); any thread."""
        self.queue.reserve(num_prompt_tokens, refuse)

    def lora_adapter(self, request: LoRARequest) -> LoRAAdapter:
        """The adapter ``request`` names, loaded on first use; ValueError if it cannot
        serve. Any thread."""
        return self.loras.get(request)

    def remove_lora(self, lora_id: int) -> bool:
        """Forget an adapter; requests already running with it finish with it."""
        return self.loras.remove(lora_id)

    def reset_prefix_cache(self) -> int:
        """Forget the prefixes of the blocks no request holds; returns how many. Core thread."""
        return self.allocator.reset_prefix_cache()

    @property
    def num_requests(self) -> int:
        """The user requests the core holds (queued or running); safe to read from any thread."""
        return len(self._table)

    def abort(self, request_id: str) -> RequestState | None:
        """End a request wherever it is; its blocks go back at once."""
        state = self._table.state(request_id)
        if state is not None:
            self._table.end(state, RequestStatus.FINISHED_ABORTED)
            state.mark_updated()
        return state

    def abort_all(self) -> list[RequestState]:
        return [s for rid in list(self._table.requests) if (s := self.abort(rid)) is not None]

    def has_work(self) -> bool:
        return self.scheduler.has_work() or self._in_flight is not None

    def close(self, keep_cache: bool = True) -> None:
        """Release what the core started (tensor-parallel workers); idempotent. ``keep_cache``:
        the engine ended soundly, so its cached prefixes go down to the prompt cache's tiers."""
        tiers = self.allocator.tiers
        if keep_cache and tiers is not None:
            move_blocks(self.runner, tiers, self.allocator.spill())
        self.runner.close()

    def stats(self) -> EngineStats:
        spec = self.spec.totals if self.spec is not None else SpecDecodeCounts()
        return EngineStats(
            num_running=self.scheduler.num_running,
            num_waiting=self.scheduler.num_waiting,
            kv_blocks_total=self.allocator.num_blocks,
            kv_blocks_free=self.allocator.num_free_blocks,
            prefix_cache_hit_rate=self.allocator.stats.hit_rate,
            generated_tokens=self.finisher.generated_tokens,
            prompt_tokens=self._prompt_tokens,
            steps=self._steps,
            num_preemptions=self._preemptions,
            **tier_fields(self.allocator),
            **{f"spec_{k}": v for k, v in dataclasses.asdict(spec).items()},
            **self.queue.stats_fields(),
        )

    # ---- the step ------------------------------------------------------------------

    def step(self) -> list[RequestState]:
        """Run one step; returns the states that have something new to read.

        With async scheduling a step is queued on the device and its tokens are read in the
        next call, after that call has queued its own step: the host schedules and prepares
        step N+1, and handles step N's tokens (detokenizing, stop checks, outputs), while the
        device computes. Step N+1 reads step N's tokens on the device; a request that step N
        finished wastes its row of step N+1, whose token is dropped.
        """
        touched = self._table.expire_waiting(self.config.max_queue_wait_s)
        if self._in_flight is not None and self._table.host_bound:
            # Some request's next sampling needs its last token on the host (a grammar,
            # penalties, min_tokens): no step runs ahead of its tokens while it lives.
            touched += self._finish_in_flight()
        if self.spec is not None:
            self.spec.propose(self.scheduler.running)
        sched = self.scheduler.schedule()
        touched += self._table.fail(sched.unfit, self.scheduler.unfit_error())
        self._preemptions += len(sched.preempted)
        launched = None
        if sched:
            self._steps += 1
            for req in sched.requests:
                self.queue.started(self._seqs[req].state.request_id, time.monotonic())
            with self.finisher.failing_alone(sched.requests, touched):
                launched = self.launcher.launch(
                    sched, self._seqs, self.finisher.reported_prompt_logprobs, self._in_flight
                )
        touched += self._finish_in_flight()
        if launched is not None:
            self._in_flight = launched
            if not self.async_scheduling or launched.must_finish_now:
                touched += self._finish_in_flight()
        touched = list(dict.fromkeys(touched))
        for state in touched:
            state.mark_updated()
        return touched

    def _finish_in_flight(self) -> list[RequestState]:
        """Read the tokens of the step in flight, if any, and update its requests."""
        launched, self._in_flight = self._in_flight, None
        if launched is None:
            return []
        touched: list[RequestState] = []
        with self.finisher.failing_alone(launched.sched.requests, touched):
            touched += self.finisher.finish(launched)
        return touched
