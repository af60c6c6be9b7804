"""The second half of a step: a launched step's tokens read back and its requests updated
(tokens appended, stops checked, speculation verified, prompt logprobs and embeddings
recorded), a request's failure kept to itself."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from llmkit.engine.core.launch import Launched
from llmkit.engine.core.output_state import RequestState
from llmkit.engine.core.pooling import pool_step
from llmkit.engine.core.request_table import RequestTable
from llmkit.engine.core.token_output import record_prompt_logprobs, record_token
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.scheduler import Scheduler
from llmkit.errors import EngineDeadError
from llmkit.model.sampler import SampledToken, Sampler

if TYPE_CHECKING:  # imported only where speculation is configured
    from llmkit.engine.core.spec.decoder import SpeculativeDecoder

logger = logging.getLogger(__name__)


class StepFinisher:
    """Reads a launched step's results into its requests (the Launcher launches it);
    counts the tokens generated."""

    def __init__(
        self,
        table: RequestTable,
        scheduler: Scheduler,
        sampler: Sampler,
        tokenizer: Tokenizer,
        spec: SpeculativeDecoder | None,
        max_model_len: int,
        normalize: bool,
    ) -> None:
        self._table, self.seqs = table, table.seqs
        self.scheduler, self.sampler, self.tokenizer, self.spec = (
            scheduler,
            sampler,
            tokenizer,
            spec,
        )
        self.max_model_len, self.normalize = max_model_len, normalize
        self.generated_tokens = 0

    @contextlib.contextmanager
    def failing_alone(self, requests: list[Request], touched: list[RequestState]) -> Iterator[None]:
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

    def finish(self, launched: Launched) -> list[RequestState]:
        """Wait for a launched step's tokens and update its requests with them."""
        plan, logits = launched.plan, launched.logits
        touched: list[RequestState] = []
        for req, first, row, count in plan.prompt_logprobs:
            assert logits is not None
            if req in self.seqs:
                with self.failing_alone([req], touched):
                    state = self.seqs[req].state
                    rows = logits[row : row + count]
                    text = self.tokenizer.token_text
                    record_prompt_logprobs(state, req, first, rows, self.sampler, text)
        if launched.sampled is not None and launched.batch is not None:
            tokens = launched.sampled.tokens()
            for (req, _), (a, b) in zip(plan.sample, launched.batch.spans):
                req.num_output_placeholders -= 1
                seq = self.seqs.get(req)
                if seq is None or req.is_finished:
                    continue  # ended while its token was in flight (stopped, aborted, failed)
                with self.failing_alone([req], touched):
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

    def reported_prompt_logprobs(self, req: Request) -> int | None:
        reported = self.seqs[req].state.prompt_logprobs
        return None if reported is None else len(reported)

    def _append_token(self, req: Request, token: SampledToken) -> None:
        seq = self.seqs[req]
        tid = token.token_id
        if req.matcher is not None and not req.matcher.accept(tid):
            # Only a row whose every token was masked out (by the grammar together with
            # allowed_token_ids, say) can sample a token its grammar refuses.
            error = f"token {tid} does not continue the structured-output grammar"
            self._table.fail([req], error)
            return
        req.output_token_ids.append(tid)
        self.generated_tokens += 1
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
        normalize = self.normalize
        for req, embedding in pool_step(pooled, hidden, self.seqs, normalize):
            state = self.seqs[req].state
            with state.lock:
                state.embedding = embedding
            self.scheduler.finish(req, RequestStatus.FINISHED_STOPPED)
            self._table.forget(state)
            states.append(state)
        return states
