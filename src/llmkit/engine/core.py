"""EngineCore: one synchronous step at a time: schedule -> execute -> sample -> update."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator

import torch

from llmkit.config import EngineConfig
from llmkit.engine.encoder_cache import EncoderCache
from llmkit.engine.lora_store import LoRAStore
from llmkit.engine.output_state import RequestState
from llmkit.engine.pooling import pool_step
from llmkit.engine.resolve import resolve
from llmkit.engine.sched.admission import AdmissionQueue
from llmkit.engine.sched.kv_cache import BlockAllocator
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.scheduler import Scheduler, SchedulerOutput
from llmkit.engine.sched.step_rows import plan_rows
from llmkit.engine.sched.stop import check_stop
from llmkit.engine.seq_state import SeqState
from llmkit.engine.speculative import create_speculative_decoder
from llmkit.engine.stats import EngineStats
from llmkit.engine.tokenizer import Tokenizer
from llmkit.engine.tokenizers import Tokenizers
from llmkit.errors import EngineDeadError, LLMKitError
from llmkit.executor.runner import create_runner
from llmkit.model.cpu_kernels import start_cpu_kernel_builds
from llmkit.model.lora_adapter import LoRAAdapter
from llmkit.model.runner import resolve_device
from llmkit.model.sampler import SampledToken, Sampler
from llmkit.outputs import Logprob, PositionLogprobs

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
        self.runner = create_runner(config, model.path, model.hf_config, self.max_model_len)
        self.allocator = BlockAllocator(
            self.runner.num_blocks, config.block_size, config.enable_prefix_caching
        )
        self.scheduler = Scheduler(
            self.allocator,
            config.max_num_seqs,
            model.max_num_batched_tokens,
            config.enable_chunked_prefill,
            encoder_only=model.info.is_encoder,
            max_loras=config.max_loras if config.enable_lora else 0,
        )
        self.loras = LoRAStore(self.runner.lora.layout if self.runner.lora else None)
        self.sampler = Sampler(model.info.vocab_size, self.runner.device, config.seed)
        self.encoder = EncoderCache(self.runner.embed_images)
        self.spec = create_speculative_decoder(
            config, model.info, self.tokenizer, self.runner.num_blocks
        )
        self._requests: dict[str, list[Request]] = {}  # user request id -> its sequences
        self._seqs: dict[Request, SeqState] = {}
        self._steps = self._generated_tokens = self._prompt_tokens = self._preemptions = 0
        # Reserved by callers before add(); released here when a request first runs.
        self.queue = AdmissionQueue(config.max_queued_requests, config.max_queued_tokens)

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
            if state.request_id in self._requests:
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
        self._requests[state.request_id] = requests
        self.queue.enter(state.request_id, requests[0].arrival_time, len(state.prompt_token_ids))
        for req, seq in zip(requests, seqs):
            self._seqs[req] = seq
            self._prompt_tokens += req.num_prompt_tokens
            self.scheduler.add(req)
        return None

    @property
    def num_requests(self) -> int:
        """The user requests the core holds (queued or running); safe to read from any thread."""
        return len(self._requests)

    def abort(self, request_id: str) -> RequestState | None:
        """End a request wherever it is; its blocks go back at once."""
        requests = self._requests.get(request_id)
        if not requests:
            return None
        state = self._seqs[requests[0]].state
        self._end(state, RequestStatus.FINISHED_ABORTED)
        state.mark_updated()
        return state

    def abort_all(self) -> list[RequestState]:
        return [s for rid in list(self._requests) if (s := self.abort(rid)) is not None]

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def close(self) -> None:
        """Release what the core started (tensor-parallel workers); idempotent."""
        self.runner.close()

    def stats(self) -> EngineStats:
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
            **{f"spec_{k}": v for k, v in dataclasses.asdict(self.spec.totals).items()},
            **self.queue.stats_fields(),
        )

    # ---- the step ------------------------------------------------------------------

    def step(self) -> list[RequestState]:
        """Run one step; returns the states that have something new to read."""
        touched = self._expire_waiting()
        self.spec.propose(self.scheduler.running)
        sched = self.scheduler.schedule()
        self._preemptions += len(sched.preempted)
        if sched:
            self._steps += 1
            for req in sched.requests:
                self.queue.started(self._seqs[req].state.request_id, time.monotonic())
            try:
                touched += self._execute(sched)
            except EngineDeadError:
                raise  # a lost tensor-parallel worker: no later step can run either
            except Exception as exc:  # one bad step must not end the engine
                logger.exception("engine step failed; failing its %d requests", len(sched.requests))
                touched += self._fail(sched.requests, f"engine step failed: {exc!r}")
        for state in touched:
            state.mark_updated()
        return touched

    def _expire_waiting(self) -> list[RequestState]:
        """Fail the requests that waited longer than ``max_queue_wait_s`` for a first step."""
        limit = self.config.max_queue_wait_s
        overdue = self.queue.overdue(limit, time.monotonic()) if limit else []
        return [s for rid, exc in overdue for s in self._fail(self._requests[rid][:1], exc)]

    def _execute(self, sched: SchedulerOutput) -> list[RequestState]:
        seqs = self.encoder.seq_inputs(sched.requests, sched.num_new_tokens, self.allocator)
        for req, seq_input in zip(sched.requests, seqs):
            seq_input.lora = self._seqs[req].lora
        self.spec.fill(sched.requests, seqs, self._seqs)
        hidden = self.runner.execute(self.spec.expand(sched.requests, seqs))
        plan = plan_rows(sched, self._reported_prompt_logprobs)
        logits = self.runner.compute_logits(hidden[plan.rows]) if plan.rows else None
        touched: dict[str, RequestState] = {}
        for req, first, row, count in plan.prompt_logprobs:
            assert logits is not None
            with self._isolated(req, touched):
                self._add_prompt_logprobs(req, first, logits[row : row + count])
        self.scheduler.advance(sched)
        if plan.sample:
            assert logits is not None
            batch = self.spec.sample_batch(plan.sample, self._seqs)
            tokens = self.sampler(
                logits[batch.logit_rows], batch.rows, batch.drafts, batch.draft_probs
            )
            for (req, _), (a, b) in zip(plan.sample, batch.spans):
                seq = self._seqs.get(req)
                if seq is None:  # a sibling's failure ended the whole request
                    continue
                with self._isolated(req, touched):
                    for token in self.spec.verify(req, tokens[a:b], self.scheduler, seq.state):
                        self._append_token(req, token)
                        if req.is_finished:  # the rest would run past its stop
                            break
                touched[seq.state.request_id] = seq.state
        if plan.pool:
            for state in self._pool(plan.pool, hidden):
                touched[state.request_id] = state
        return list(touched.values())

    @contextlib.contextmanager
    def _isolated(self, req: Request, touched: dict[str, RequestState]) -> Iterator[None]:
        """Run one request's share of a step's bookkeeping; if it fails, that request alone
        fails (its reader gets the error) and the step goes on for the others."""
        try:
            yield
        except Exception as exc:
            logger.exception("request %s failed in a step", req.request_id)
            for state in self._fail([req], f"engine step failed: {exc!r}"):
                touched[state.request_id] = state

    def _reported_prompt_logprobs(self, req: Request) -> int | None:
        reported = self._seqs[req].state.prompt_logprobs
        return None if reported is None else len(reported)

    def _append_token(self, req: Request, token: SampledToken) -> None:
        state = self._seqs[req].state
        comp = state.completions[req.index]
        tid = token.token_id
        if req.matcher is not None and not req.matcher.accept(tid):
            # Only a row whose every token was masked out (by the grammar together with
            # allowed_token_ids, say) can sample a token its grammar refuses.
            self._fail([req], f"token {tid} does not continue the structured-output grammar")
            return
        req.output_token_ids.append(tid)
        self._generated_tokens += 1
        with state.lock:
            state.num_cached_tokens = max(req.num_cached_tokens, 0)
            comp.token_ids.append(tid)
            if token.logprobs is not None:
                comp.cumulative_logprob += token.logprobs[0][1]
                comp.logprobs.append(self._position_logprobs(token.logprobs))
            detokenizer = comp.detokenizer
            assert detokenizer is not None
            stop = check_stop(
                req,
                tid,
                lambda can_stop: detokenizer.update(tid, check_stop=can_stop),
                self.max_model_len,
                grammar_done=req.matcher is not None and req.matcher.is_terminated(),
            )
            if stop is not None:
                self.scheduler.finish(req, stop.status)
                self._seqs[req].generator = None
                comp.finish_reason = req.finish_reason
                comp.stop_reason = stop.reason
        if state.finished:
            self._forget(state)

    def _position_logprobs(self, entries: list[tuple[int, float, int]]) -> PositionLogprobs:
        text = self.tokenizer.token_text
        return {tid: Logprob(lp, rank, text(tid)) for tid, lp, rank in entries}

    def _add_prompt_logprobs(self, req: Request, first: int, logits: torch.Tensor) -> None:
        state = self._seqs[req].state
        assert req.sampling_params is not None and state.prompt_logprobs is not None
        targets = req.prompt_token_ids[first + 1 : first + 1 + len(logits)]
        ranked = self.sampler.prompt_logprobs(
            logits, targets, req.sampling_params.prompt_logprobs or 0
        )
        positions = [self._position_logprobs(entries) for entries in ranked]
        with state.lock:
            state.prompt_logprobs.extend(positions)

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
            self._forget(state)
            states.append(state)
        return states

    def _fail(self, requests: list[Request], error: str | LLMKitError) -> list[RequestState]:
        """End the requests of ``requests`` with ``error``; a message fails them as failed steps."""
        seqs = [seq for r in requests if (seq := self._seqs.get(r)) is not None]
        failed = {seq.state.request_id: seq.state for seq in seqs}
        for state in failed.values():
            with state.lock:
                state.error = str(error)
                state.failure = error if isinstance(error, LLMKitError) else None
            self._end(state, RequestStatus.FINISHED_ERROR)
        return list(failed.values())

    def _end(self, state: RequestState, status: RequestStatus) -> None:
        for req in self._requests.get(state.request_id, []):
            if not req.is_finished:
                self.scheduler.finish(req, status)
                with state.lock:
                    if not state.pooling:
                        state.completions[req.index].finish_reason = req.finish_reason
        self._forget(state)

    def _forget(self, state: RequestState) -> None:
        self.queue.ended(state.request_id)
        for req in self._requests.pop(state.request_id, []):
            self._seqs.pop(req, None)
            self.encoder.free(req)
