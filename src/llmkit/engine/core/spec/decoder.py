"""Speculative decoding in the core: proposals before a step, their check after it.

Proposals come from n-gram lookup, before scheduling, or from a draft model (its own
runner, :mod:`llmkit.engine.core.spec.draft`), which runs once the scheduler has made room for
them: the scheduler sees placeholders, the draft fills in as many as got room.

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

import torch

from llmkit.config import EngineConfig
from llmkit.engine.core.output_state import RequestState
from llmkit.engine.core.sample_batch import SampleBatch
from llmkit.engine.core.seq_state import SeqState
from llmkit.engine.core.spec.draft import DraftModel
from llmkit.engine.core.spec.ngram import NgramProposer
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.sched.context_window import context_room
from llmkit.engine.sched.request import Request
from llmkit.engine.sched.scheduler import Scheduler
from llmkit.model.batch import SeqInput
from llmkit.model.sampler import SampledToken
from llmkit.outputs import SpecDecodeCounts
from llmkit.types import ModelInfo

logger = logging.getLogger(__name__)
_LOG_EVERY_DRAFTS = 1000  # an acceptance-rate line in the log after this many checks


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

    def __init__(self, spec: dict, max_model_len: int, draft: DraftModel | None = None):
        self.proposer = (
            NgramProposer(
                spec["num_speculative_tokens"], spec["prompt_lookup_max"], spec["prompt_lookup_min"]
            )
            if spec["method"] == "ngram"
            else None
        )
        self.draft = draft
        self.k: int = spec["num_speculative_tokens"]
        # vLLM's: at this many running requests a step's rows are better spent on them all
        self.disable_at: int | None = spec["disable_by_batch_size"]
        self.max_model_len = max_model_len
        self._probs: dict[Request, torch.Tensor | None] = {}  # this step's draft q
        self.totals = SpecDecodeCounts()
        self._pace: weakref.WeakKeyDictionary[Request, _Pace] = weakref.WeakKeyDictionary()
        self._logged_at = 0

    def propose(self, running: list[Request]) -> None:
        """Proposals for each running request that decodes next and can take them.

        Structured outputs are left out: their grammar advances one sampled token at a time.
        """
        for req in running:
            req.spec_token_ids.clear()
        if self.disable_at is not None and len(running) >= self.disable_at:
            return
        for req in running:
            if req.sampling_params is None or req.matcher is not None:
                continue
            if req.num_computed_tokens != req.num_tokens - 1:
                continue  # still prefilling
            limit = min(
                req.max_tokens - req.num_output_tokens - 1,
                context_room(req.num_tokens, self.max_model_len),
            )
            pace = self._pace.setdefault(req, _Pace(self.k))
            if pace.wait > 0:
                pace.wait -= 1
                continue
            if self.proposer is None:  # the draft model fills these in once scheduled
                req.spec_token_ids = [0] * max(min(limit, pace.length), 0)
                continue
            tokens = req.prompt_token_ids + req.output_token_ids
            req.spec_token_ids = self.proposer.propose(tokens, min(limit, pace.length))

    def fill(
        self, requests: list[Request], seqs: list[SeqInput], states: dict[Request, SeqState]
    ) -> None:
        """The draft model's proposals for the scheduled requests (none with n-gram)."""
        if self.draft is None:
            return
        generators = {r: s.generator for r, s in states.items()}
        proposals = self.draft.propose(requests, seqs, generators)
        self._probs = {req: p.probs for req, p in proposals.items()}

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
        if any(q is not None for q in self._probs.values()):
            batch.draft_probs = self._draft_probs(sample, batch)
        self._probs = {}
        return batch

    def _draft_probs(self, sample: list[tuple[Request, int]], batch: SampleBatch) -> torch.Tensor:
        """Each row's draft distribution; zero where it checks no draft-drawn proposal."""
        some = next(q for q in self._probs.values() if q is not None)
        out = some.new_zeros(len(batch.rows), some.shape[-1])
        for (req, _), (start, _) in zip(sample, batch.spans):
            q = self._probs.get(req)
            if q is not None:
                out[start : start + len(q)] = q
        return out

    def verify(
        self,
        req: Request,
        tokens: list[SampledToken],
        scheduler: Scheduler,
        state: RequestState,
    ) -> list[SampledToken]:
        """The tokens ``req`` emits from its rows' ``tokens``; rejected proposals' KV goes."""
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
        if self.draft is not None:
            self.draft.accepted(req, req.num_tokens, len(spec), accepted)
        scheduler.reject_drafts(req, len(spec) - accepted)
        pace = self._pace.get(req)
        if pace is not None:
            pace.update(len(spec), accepted, self.k)
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


def create_speculative_decoder(
    config: EngineConfig, spec: dict, info: ModelInfo, tokenizer: Tokenizer, num_blocks: int
) -> SpeculativeDecoder:
    """The decoder ``spec`` (``config.speculative_config``) asks for; a draft model is
    loaded here, and ``ValueError`` names what makes it unusable."""
    draft = None
    if spec["method"] == "draft_model":
        draft = DraftModel(config, spec, info, tokenizer, num_blocks)
    return SpeculativeDecoder(spec, info.max_model_len, draft)


def _add(counts: SpecDecodeCounts, proposed: int, accepted: int, emitted: int) -> None:
    counts.num_drafts += 1
    counts.num_draft_tokens += proposed
    counts.num_accepted_tokens += accepted
    counts.num_emitted_tokens += emitted
