"""EngineCore: one synchronous step at a time: schedule -> execute -> sample -> update."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from llmkit.config import EngineConfig
from llmkit.model.demo import resolve_model
from llmkit.engine.kv_cache import BlockAllocator
from llmkit.engine.output_state import RequestState
from llmkit.engine.processor import InputProcessor
from llmkit.engine.request import Request, RequestStatus
from llmkit.engine.scheduler import Scheduler, SchedulerOutput
from llmkit.model.loader import load_hf_config, model_class
from llmkit.model.pooler import PoolingAccumulator, finish_embeddings, reduce_chunks
from llmkit.model.pooling_config import PoolingConfig, resolve_pooling_config
from llmkit.model.runner import ModelRunner, SeqInput
from llmkit.model.sampler import SampledToken, Sampler, SamplingRow
from llmkit.outputs import Logprob
from llmkit.engine.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

_DEFAULT_BATCHED_TOKENS = 2048


@dataclass(frozen=True)
class EngineStats:
    """A snapshot of the engine's load and counters."""

    num_running: int
    num_waiting: int
    kv_blocks_total: int
    kv_blocks_free: int
    prefix_cache_hit_rate: float
    generated_tokens: int
    prompt_tokens: int
    steps: int
    num_preemptions: int


class EngineCore:
    def __init__(self, config: EngineConfig):
        self.config = config
        path = resolve_model(config.model)
        self.model_path = path
        self.hf_config = load_hf_config(path)
        cls = model_class(self.hf_config)
        self.is_encoder = bool(getattr(cls, "is_encoder", False))
        self.task = self._resolve_task()
        # Read once here: what a pooling request gets for the fields it leaves as None.
        self.pooling_config: PoolingConfig = resolve_pooling_config(
            path, getattr(cls, "default_pooling_type", "last")
        )
        self.tokenizer = Tokenizer(resolve_model(config.tokenizer) if config.tokenizer else path)
        self.max_model_len = self._resolve_max_model_len()
        # An encoder computes each input whole in one step, so one step must hold the longest.
        whole_prompts = not config.enable_chunked_prefill or self.is_encoder
        budget = config.max_num_batched_tokens
        if budget is None:
            budget = _DEFAULT_BATCHED_TOKENS
            if whole_prompts:
                budget = max(budget, self.max_model_len)
        elif whole_prompts and budget < self.max_model_len:
            why = "for an encoder-only model" if self.is_encoder else (
                "when chunked prefill is disabled"
            )
            raise ValueError(
                f"max_num_batched_tokens ({budget}) must be >= max_model_len "
                f"({self.max_model_len}) {why}"
            )
        self.runner = ModelRunner(config, path, self.hf_config, self.max_model_len)
        self.allocator = BlockAllocator(
            self.runner.num_blocks, config.block_size, config.enable_prefix_caching
        )
        self.scheduler = Scheduler(
            self.allocator,
            config.max_num_seqs,
            budget,
            config.enable_chunked_prefill,
            encoder_only=self.is_encoder,
        )
        vocab_size = self.hf_config.vocab_size
        self.sampler = Sampler(vocab_size, self.runner.device)
        self.processor = InputProcessor(
            config,
            self.tokenizer,
            self.max_model_len,
            vocab_size,
            task=self.task,
            hidden_size=self.hf_config.hidden_size,
            is_encoder=self.is_encoder,
        )
        self._states: dict[str, RequestState] = {}
        self._requests: dict[str, list[Request]] = {}
        self._owner: dict[Request, RequestState] = {}
        self._generators: dict[Request, torch.Generator] = {}
        self._poolers: dict[Request, PoolingAccumulator] = {}
        self._steps = 0
        self._generated_tokens = 0
        self._prompt_tokens = 0
        self._preemptions = 0
        # Test hook: an exception to raise inside the next step (see AsyncEngine tests).
        self.fail_next_step: BaseException | None = None

    def _resolve_task(self) -> str:
        task = self.config.task
        if task == "auto":
            return "embed" if self.is_encoder else "generate"
        if task == "generate" and self.is_encoder:
            archs = ", ".join(getattr(self.hf_config, "architectures", None) or ["this model"])
            raise ValueError(
                f"task='generate' needs a decoder, but {archs} is an embedding-only encoder; "
                "use task='embed' (or 'auto')"
            )
        return task

    @property
    def supports_generate(self) -> bool:
        return self.processor.supports_generate

    @property
    def supports_embed(self) -> bool:
        return self.processor.supports_embed

    def _resolve_max_model_len(self) -> int:
        limit = getattr(self.hf_config, "max_position_embeddings", None) or 2048
        source = "max_position_embeddings"
        st_limit = self.pooling_config.max_seq_length
        if self.task == "embed" and st_limit is not None and st_limit < limit:
            # The length sentence-transformers cuts inputs to; vLLM caps max_model_len there too.
            limit, source = st_limit, "max_seq_length (sentence_bert_config.json)"
        wanted = self.config.max_model_len
        if wanted is None:
            return limit
        if wanted > limit:
            raise ValueError(f"max_model_len={wanted} is more than the model's {source}={limit}")
        return wanted

    # ---- requests in and out -------------------------------------------------------

    def add(self, state: RequestState, requests: list[Request]) -> None:
        if state.request_id in self._states:
            raise ValueError(f"request id {state.request_id!r} is already running")
        self._states[state.request_id] = state
        self._requests[state.request_id] = requests
        for req in requests:
            self._owner[req] = state
            params = req.sampling_params
            if params is not None and params.seed is not None:
                gen = torch.Generator(device=self.runner.device)
                gen.manual_seed(params.seed)
                self._generators[req] = gen
            if req.pooling_params is not None:
                kind = req.pooling_params.pooling_type or self.pooling_config.pooling_type
                self._poolers[req] = PoolingAccumulator(kind)
            self._prompt_tokens += req.num_prompt_tokens
            self.scheduler.add(req)

    def abort(self, request_id: str) -> RequestState | None:
        """End a request wherever it is; its blocks go back at once."""
        state = self._states.get(request_id)
        if state is None:
            return None
        self._end(state, RequestStatus.FINISHED_ABORTED)
        state.mark_updated()
        return state

    def abort_all(self) -> list[RequestState]:
        return [s for rid in list(self._states) if (s := self.abort(rid)) is not None]

    def has_work(self) -> bool:
        return self.scheduler.has_work()

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
        )

    # ---- the step ------------------------------------------------------------------

    def step(self) -> list[RequestState]:
        """Run one step; returns the states that have something new to read."""
        sched = self.scheduler.schedule()
        self._preemptions += len(sched.preempted)
        if not sched:
            return []
        self._steps += 1
        try:
            if self.fail_next_step is not None:
                error, self.fail_next_step = self.fail_next_step, None
                raise error
            touched = self._execute(sched)
        except Exception as exc:  # noqa: BLE001 - one bad step must not end the engine
            logger.exception("engine step failed; failing its %d requests", len(sched.requests))
            touched = self._fail(sched.requests, f"engine step failed: {exc!r}")
        for state in touched:
            state.mark_updated()
        return touched

    def _execute(self, sched: SchedulerOutput) -> list[RequestState]:
        seqs = []
        for req, n in zip(sched.requests, sched.num_new_tokens):
            start = req.num_computed_tokens
            seqs.append(SeqInput(req.tokens(start, start + n), start, self.allocator.block_ids(req)))
        hidden = self.runner.execute(seqs)

        # Which rows need logits: the last row of each request that samples now, and the
        # prompt rows of requests that want prompt logprobs.
        logit_rows: list[int] = []
        samplers: list[tuple[Request, int]] = []
        prompt_lp: list[tuple[Request, int, int, int]] = []  # req, first pos, logit row, count
        pooled: list[tuple[Request, int, int]] = []
        offset = 0
        for req, n in zip(sched.requests, sched.num_new_tokens):
            start = req.num_computed_tokens
            if req.is_pooling:
                pooled.append((req, offset, n))
            else:
                state = self._owner[req]
                if state.prompt_logprobs is not None and req.index == 0:
                    first = len(state.prompt_logprobs) - 1  # positions already reported
                    last = min(start + n, req.num_prompt_tokens - 1)
                    if last > max(first, start):
                        lo = max(first, start)
                        prompt_lp.append((req, lo, len(logit_rows), last - lo))
                        logit_rows.extend(range(offset + lo - start, offset + last - start))
                if start + n == req.num_tokens:
                    samplers.append((req, len(logit_rows)))
                    logit_rows.append(offset + n - 1)
            offset += n

        logits = self.runner.compute_logits(hidden[logit_rows]) if logit_rows else None
        touched: dict[str, RequestState] = {}
        for req, pos, row, count in prompt_lp:
            self._add_prompt_logprobs(req, pos, logits[row : row + count])
        for req, n in zip(sched.requests, sched.num_new_tokens):
            req.num_computed_tokens += n
        if samplers:
            rows = [self._sampling_row(req) for req, _ in samplers]
            tokens = self.sampler(logits[[row for _, row in samplers]], rows)
            for (req, _), token in zip(samplers, tokens):
                state = self._owner[req]
                self._append_token(req, token)
                touched[state.request_id] = state
        if pooled:
            for state in self._pool(pooled, hidden):
                touched[state.request_id] = state
        return list(touched.values())

    def _sampling_row(self, req: Request) -> SamplingRow:
        return SamplingRow(
            params=req.sampling_params,
            prompt_token_ids=req.prompt_token_ids,
            output_token_ids=req.output_token_ids,
            eos_token_id=req.eos_token_id,
            generator=self._generators.get(req),
        )

    def _append_token(self, req: Request, token: SampledToken) -> None:
        state = self._owner[req]
        comp = state.completions[req.index]
        params = req.sampling_params
        tid = token.token_id
        req.output_token_ids.append(tid)
        self._generated_tokens += 1
        with state.lock:
            state.num_cached_tokens = max(req.num_cached_tokens, 0)
            comp.token_ids.append(tid)
            if token.logprobs is not None:
                comp.cumulative_logprob += token.logprobs[0][1]
                comp.logprobs.append(self._position_logprobs(token.logprobs))
            status = None
            stop_reason: int | str | None = None
            can_stop = req.num_output_tokens >= params.min_tokens
            if can_stop and not params.ignore_eos and tid == req.eos_token_id:
                status = RequestStatus.FINISHED_STOPPED
            elif can_stop and tid in params.stop_token_ids:
                status, stop_reason = RequestStatus.FINISHED_STOPPED, tid
            if status is None or params.include_stop_str_in_output:
                stop = comp.detokenizer.update(tid, check_stop=can_stop)
                if stop is not None and status is None:
                    status, stop_reason = RequestStatus.FINISHED_STOPPED, stop
            if status is None and (
                req.num_output_tokens >= req.max_tokens or req.num_tokens >= self.max_model_len
            ):
                status = RequestStatus.FINISHED_LENGTH
            if status is not None:
                self.scheduler.finish(req, status)
                self._generators.pop(req, None)
                comp.finish_reason = req.finish_reason
                comp.stop_reason = stop_reason
        if state.finished:
            self._forget(state)

    def _position_logprobs(self, entries: list[tuple[int, float, int]]) -> dict[int, Logprob]:
        text = self.tokenizer.token_text
        return {tid: Logprob(lp, rank, text(tid)) for tid, lp, rank in entries}

    def _add_prompt_logprobs(self, req: Request, first: int, logits: torch.Tensor) -> None:
        state = self._owner[req]
        k = req.sampling_params.prompt_logprobs
        logprobs = torch.log_softmax(logits, dim=-1)
        targets = torch.tensor(req.prompt_token_ids[first + 1 : first + 1 + len(logits)])
        actual = logprobs.gather(1, targets[:, None].to(logprobs.device))
        ranks = ((logprobs > actual).sum(-1) + 1).tolist()
        top_vals, top_ids = logprobs.topk(k, dim=-1) if k else (logprobs[:, :0], logprobs[:, :0])
        top_vals, top_ids = top_vals.tolist(), top_ids.long().tolist()
        positions = []
        for i, target in enumerate(targets.tolist()):
            entries = [(target, actual[i, 0].item(), ranks[i])]
            entries += [(top_ids[i][j], top_vals[i][j], j + 1) for j in range(k)]
            positions.append(self._position_logprobs(entries))
        with state.lock:
            state.prompt_logprobs.extend(positions)

    def _pool(
        self, pooled: list[tuple[Request, int, int]], hidden: torch.Tensor
    ) -> list[RequestState]:
        """Pool this step's chunks of pooling requests; finish those whose input is all done."""
        chunks = [(self._poolers[req].pooling_type, off, n) for req, off, n in pooled]
        done: list[Request] = []
        for (req, _, n), part in zip(pooled, reduce_chunks(hidden, chunks)):
            self._poolers[req].add(part, n)
            if req.num_computed_tokens >= req.num_tokens:
                done.append(req)
        if not done:
            return []
        default = self.pooling_config.normalize
        settings = [
            (default if p.normalize is None else p.normalize, p.dimensions)
            for p in (req.pooling_params for req in done)
        ]
        embeddings = finish_embeddings([self._poolers[req].vector() for req in done], settings)
        states = []
        for req, embedding in zip(done, embeddings):
            state = self._owner[req]
            with state.lock:
                state.embedding = embedding
            self.scheduler.finish(req, RequestStatus.FINISHED_STOPPED)
            self._forget(state)
            states.append(state)
        return states

    def _fail(self, requests: list[Request], message: str) -> list[RequestState]:
        failed = {self._owner[r].request_id: self._owner[r] for r in requests if r in self._owner}
        for state in failed.values():
            with state.lock:
                state.error = message
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
        for req in self._requests.pop(state.request_id, []):
            self._owner.pop(req, None)
            self._generators.pop(req, None)
            self._poolers.pop(req, None)
        self._states.pop(state.request_id, None)
