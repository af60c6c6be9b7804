"""EngineCore: one synchronous step at a time: schedule -> execute -> sample -> update."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from llmkit.config import EngineConfig
from llmkit.engine.core.encoder_cache import EncoderCache
from llmkit.engine.core.launch import Launched, Launcher, resolve_async_scheduling
from llmkit.engine.core.lora_store import LoRAStore
from llmkit.engine.core.output_state import RequestState
from llmkit.engine.core.pooling import pool_step
from llmkit.engine.core.prompt_cache import move_blocks, open_tiers, tier_fields
from llmkit.engine.core.request_table import RequestTable
from llmkit.engine.core.resolve import resolve
from llmkit.engine.core.seq_state import SeqState
from llmkit.engine.core.token_output import record_prompt_logprobs, record_token
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.core.tokenizers import Tokenizers
from llmkit.engine.sched.admission import AdmissionQueue
from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.scheduler import Scheduler
from llmkit.errors import EngineDeadError
from llmkit.executor.runner import create_runner
from llmkit.lora_request import LoRARequest
from llmkit.model.cpu_kernels import start_cpu_kernel_builds
from llmkit.model.device import resolve_device
from llmkit.model.lora_adapter import LoRAAdapter
from llmkit.model.sampler import SampledToken, Sampler
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
        self._steps = self._generated_tokens = self._prompt_tokens = self._preemptions = 0
        # Reserved by callers before add(); released here when a request first runs.
        self.queue = AdmissionQueue(config.max_queued_requests, config.max_queued_tokens)
        self._table = RequestTable(self.scheduler, self.queue, self.encoder)
        self._seqs = self._table.seqs

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
            generated_tokens=self._generated_tokens,
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
            with self._failing_alone(sched.requests, touched):
                launched = self.launcher.launch(
                    sched, self._seqs, self._reported_prompt_logprobs, self._in_flight
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
        with self._failing_alone(launched.sched.requests, touched):
            touched += self._finish(launched)
        return touched

    @contextlib.contextmanager
    def _failing_alone(
        self, requests: list[Request], touched: list[RequestState]
    ) -> Iterator[None]:
        """Run a step's work for ``requests`` (all of its, or one's share of its bookkeeping);
        if it fails, they alone fail (their readers get the error) and the engine goes on. A
        lost tensor-parallel worker, after which no step can run, ends the engine."""
        try:
            yield
        except EngineDeadError:
            raise
        except Exception as exc:
            logger.exception("engine step failed for %d requests", len(requests))
            touched += self._table.fail(requests, f"engine step failed: {exc!r}")

    def _finish(self, launched: Launched) -> list[RequestState]:
        """Wait for a launched step's tokens and update its requests with them."""
        plan, logits = launched.plan, launched.logits
        touched: list[RequestState] = []
        for req, first, row, count in plan.prompt_logprobs:
            assert logits is not None
            if req in self._seqs:
                with self._failing_alone([req], touched):
                    state = self._seqs[req].state
                    rows = logits[row : row + count]
                    text = self.tokenizer.token_text
                    record_prompt_logprobs(state, req, first, rows, self.sampler, text)
        if launched.sampled is not None and launched.batch is not None:
            tokens = launched.sampled.tokens()
            for (req, _), (a, b) in zip(plan.sample, launched.batch.spans):
                req.num_output_placeholders -= 1
                seq = self._seqs.get(req)
                if seq is None or req.is_finished:
                    continue  # ended while its token was in flight (stopped, aborted, failed)
                with self._failing_alone([req], touched):
                    emitted = tokens[a:b]
                    if self.spec is not None:
                        emitted = self.spec.verify(req, emitted, self.scheduler, seq.state)
                    for token in emitted:
                        self._append_token(req, token)
                        if req.is_finished:  # the rest would run past its stop
                            break
                touched.append(seq.state)
        if plan.pool:
            assert launched.hidden is not None
            touched += self._pool(plan.pool, launched.hidden)
        return touched

    def _reported_prompt_logprobs(self, req: Request) -> int | None:
        reported = self._seqs[req].state.prompt_logprobs
        return None if reported is None else len(reported)

    def _append_token(self, req: Request, token: SampledToken) -> None:
        seq = self._seqs[req]
        tid = token.token_id
        if req.matcher is not None and not req.matcher.accept(tid):
            # Only a row whose every token was masked out (by the grammar together with
            # allowed_token_ids, say) can sample a token its grammar refuses.
            error = f"token {tid} does not continue the structured-output grammar"
            self._table.fail([req], error)
            return
        req.output_token_ids.append(tid)
        self._generated_tokens += 1
        text, state = self.tokenizer.token_text, seq.state
        if record_token(
            state, req, token, text, self.max_model_len, lambda s: self.scheduler.finish(req, s)
        ):
            seq.generator = None
        if state.finished:
            self._table.forget(state)

    def _pool(
        self, pooled: list[tuple[Request, int, int]], hidden: torch.Tensor
    ) -> list[RequestState]:
        """Pool this step's chunks of pooling requests; finish those whose input is all done."""
        states = []
        normalize = self.pooling_config.normalize
        for req, embedding in pool_step(pooled, hidden, self._seqs, normalize):
            state = self._seqs[req].state
            with state.lock:
                state.embedding = embedding
            self.scheduler.finish(req, RequestStatus.FINISHED_STOPPED)
            self._table.forget(state)
            states.append(state)
        return states
