"""Speculative decoding in the core: n-gram proposals before a step, their check after it.

A decoding request gets up to k proposed tokens; the step computes them with its last
token in one forward over the paged KV cache, next to the other requests. Row j of its
logits judges proposal j given the proposals before it; the sampler keeps a proposal or
replaces it (greedy: by the argmax, else by rejection sampling), and the first replaced
one ends the run: the accepted proposals and the token after them are emitted, and the
KV of the rejected proposals is given back.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, replace

from llmkit.engine.output_state import RequestState
from llmkit.engine.sched.ngram import NgramProposer
from llmkit.engine.sched.request import Request
from llmkit.engine.sched.scheduler import Scheduler
from llmkit.engine.seq_state import SeqState
from llmkit.model.runner import SeqInput
from llmkit.model.sampler import SampledToken, SamplingRow
from llmkit.outputs import SpecDecodeCounts

logger = logging.getLogger(__name__)
_LOG_EVERY_DRAFTS = 1000  # an acceptance-rate line in the log after this many checks


@dataclass
class SampleBatch:
    """The sampler's input for a step: rows, their logit rows and drafts, and each
    request's span of them."""

    rows: list[SamplingRow]
    logit_rows: list[int]
    drafts: list[int | None]
    spans: list[tuple[int, int]]


@dataclass
class _Pace:
    """How much one request proposes: checking a proposal costs a row of every layer's
    matmuls, which on a CPU costs nearly what the row saves, so a request whose proposals
    keep failing (open-ended text) proposes less and less often, and one whose proposals
    hold (echoed text) proposes the full k again."""

    length: int  # the most tokens to propose next
    misses: int = 0  # checks in a row that accepted nothing
    wait: int = 0  # steps to sit out before proposing again

    def update(self, proposed: int, accepted: int, k: int) -> None:
        self.length = min(k, accepted + 1 if accepted < proposed else proposed + 1)
        self.misses = self.misses + 1 if accepted == 0 else 0
        self.wait = min(2**self.misses, 8) - 1 if self.misses else 0


class SpeculativeDecoder:
    """Proposes before each step and checks after it; counts what happened (``totals``)."""

    def __init__(self, spec: dict | None, max_model_len: int):
        self.proposer = (
            NgramProposer(
                spec["num_speculative_tokens"], spec["prompt_lookup_max"], spec["prompt_lookup_min"]
            )
            if spec
            else None
        )
        self.max_model_len = max_model_len
        self.totals = SpecDecodeCounts()
        self._pace: weakref.WeakKeyDictionary[Request, _Pace] = weakref.WeakKeyDictionary()
        self._logged_at = 0

    def propose(self, running: list[Request]) -> None:
        """Proposals for each running request that decodes next and can take them.

        Structured outputs are left out: their grammar advances one sampled token at a time.
        """
        if self.proposer is None:
            return
        for req in running:
            req.spec_token_ids.clear()
            if req.sampling_params is None or req.matcher is not None:
                continue
            if req.num_computed_tokens != req.num_tokens - 1:
                continue  # still prefilling
            limit = min(
                req.max_tokens - req.num_output_tokens - 1, self.max_model_len - req.num_tokens
            )
            pace = self._pace.setdefault(req, _Pace(self.proposer.k))
            if pace.wait > 0:
                pace.wait -= 1
                continue
            tokens = req.prompt_token_ids + req.output_token_ids
            req.spec_token_ids = self.proposer.propose(tokens, min(limit, pace.length))

    def expand(self, requests: list[Request], seqs: list[SeqInput]) -> list[SeqInput]:
        """The step's runner input with each proposal as a one-token sequence of its own
        over the same blocks: every row is then attended as a decode, by the kernel (and
        in the float order) decoding without speculation uses, so greedy output stays
        token-identical even where quantized activations would magnify a rounding change."""
        out = []
        for req, seq in zip(requests, seqs):
            tokens = seq.token_ids + req.spec_token_ids
            if not req.spec_token_ids:
                out.append(seq)
                continue
            out += [replace(seq, token_ids=[t], start=seq.start + j) for j, t in enumerate(tokens)]
        return out

    def sample_batch(
        self, sample: list[tuple[Request, int]], seqs: dict[Request, SeqState]
    ) -> SampleBatch:
        """Row j of a request with k proposals sees its outputs and proposals ``:j`` (so
        penalties and min_tokens count them) and checks proposal j; row k checks none."""
        batch = SampleBatch([], [], [], [])
        for req, first in sample:
            row = seqs[req].sampling_row(req)
            spec = req.spec_token_ids
            start = len(batch.rows)
            for j in range(len(spec) + 1):
                outputs = req.output_token_ids + spec[:j] if j else req.output_token_ids
                batch.rows.append(replace(row, output_token_ids=outputs) if j else row)
                batch.logit_rows.append(first + j)
                batch.drafts.append(spec[j] if j < len(spec) else None)
            batch.spans.append((start, len(batch.rows)))
        return batch

    def verify(
        self,
        req: Request,
        tokens: list[SampledToken],
        scheduler: Scheduler,
        state: RequestState,
    ) -> list[SampledToken]:
        """The tokens ``req`` emits from its rows' ``tokens``; rejected proposals' KV goes."""
        if self.proposer is None:
            return tokens
        spec = list(req.spec_token_ids)  # reject_drafts clears the request's
        with state.lock:  # with speculation on, every request reports its counts
            if state.spec_decode is None:
                state.spec_decode = SpecDecodeCounts()
        if not spec:
            return tokens
        accepted = 0
        while accepted < len(spec) and tokens[accepted].token_id == spec[accepted]:
            accepted += 1
        emitted = tokens[: accepted + 1]
        scheduler.reject_drafts(req, len(spec) - accepted)
        pace = self._pace.get(req)
        if pace is not None:
            pace.update(len(spec), accepted, self.proposer.k)
        _add(self.totals, len(spec), accepted, len(emitted))
        with state.lock:
            _add(state.spec_decode, len(spec), accepted, len(emitted))
        self._log()
        return emitted

    def _log(self) -> None:
        t = self.totals
        if t.num_drafts - self._logged_at >= _LOG_EVERY_DRAFTS:
            self._logged_at = t.num_drafts
            logger.info(
                "speculative decoding: %.1f%% of %d proposed tokens accepted, "
                "%.2f tokens per checked step",
                100 * t.num_accepted_tokens / max(t.num_draft_tokens, 1),
                t.num_draft_tokens,
                t.num_emitted_tokens / t.num_drafts,
            )


def _add(counts: SpecDecodeCounts, proposed: int, accepted: int, emitted: int) -> None:
    counts.num_drafts += 1
    counts.num_draft_tokens += proposed
    counts.num_accepted_tokens += accepted
    counts.num_emitted_tokens += emitted
