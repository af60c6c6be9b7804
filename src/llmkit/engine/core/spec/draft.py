"""Draft-model proposals for speculative decoding: a smaller model sharing the tokenizer
proposes k tokens for each decoding request, one batched forward per token.

The draft has its own runner and paged KV cache, indexed by the target's block tables: a
position's draft KV lives in the block that holds its target KV, so the draft's cache
needs no allocator of its own, and blocks go back (rejected proposals' included) for both
at once. Each step the draft first computes what the target computes (prompt chunks, the
last token, and any accepted proposal its KV lacks), then proposes from there.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

import torch

from llmkit.config import EngineConfig
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.sched.request import Request
from llmkit.model.batch import SeqInput
from llmkit.model.loader import load_hf_config
from llmkit.model.names import resolve_model
from llmkit.model.runner import ModelRunner
from llmkit.types import ModelInfo

_FIELD = "speculative_config's model"


@dataclass
class Proposal:
    """One request's proposed tokens, and the draft's distribution over each (None for a
    greedy request: the argmax needs none)."""

    tokens: list[int]
    probs: torch.Tensor | None  # [len(tokens), vocab]


class DraftModel:
    """The draft model with its runner; :meth:`propose` runs it for one engine step."""

    def __init__(
        self,
        config: EngineConfig,
        spec: dict,
        target: ModelInfo,
        tokenizer: Tokenizer,
        num_blocks: int,
    ):
        try:
            path = resolve_model(spec["model"])
            hf_config = load_hf_config(path)
        except (OSError, ValueError) as exc:  # a missing folder is a bad setting, named so
            raise ValueError(f"{_FIELD}: {exc}") from exc
        _check(path, hf_config.get_text_config(), target, tokenizer)
        draft_config = dataclasses.replace(
            config,
            model=path,
            tokenizer=None,
            speculative_config=None,
            enable_lora=False,
            tensor_parallel_size=1,
            num_kv_blocks=num_blocks,  # the target's block ids index this cache too
        )
        self.runner = ModelRunner(draft_config, path, hf_config, target.max_model_len)
        self.k = spec["num_speculative_tokens"]
        # Draws for requests without a seed; a seeded one draws from its own generator.
        self._generator = torch.Generator(device=self.runner.device)
        self._generator.manual_seed(config.seed + 1)
        # Per request: (its preemptions, positions whose draft KV is computed).
        self._done: weakref.WeakKeyDictionary[Request, tuple[int, int]] = (
            weakref.WeakKeyDictionary()
        )

    @torch.inference_mode()
    def propose(
        self,
        requests: list[Request],
        seqs: list[SeqInput],
        generators: dict[Request, torch.Generator | None],
    ) -> dict[Request, Proposal]:
        """Catch the draft's KV up with this step's target input, then draw as many tokens as
        each request holds placeholders for in ``spec_token_ids``."""
        inputs = []
        wanted: list[Request] = []  # the requests that propose, in batch order
        last_rows: list[int] = []  # the last input row of each
        block_ids: dict[Request, list[int]] = {}
        rows = 0
        for req, seq in zip(requests, seqs):
            if req.is_pooling:
                continue
            end = seq.start + len(seq.token_ids)
            start = self._start(req, seq.start)
            inputs.append(SeqInput(req.tokens(start, end), start, seq.block_ids))
            self._done[req] = (req.num_preemptions, end)
            rows += end - start
            if req.spec_token_ids:
                wanted.append(req)
                last_rows.append(rows - 1)
                block_ids[req] = seq.block_ids
        if not inputs:
            return {}
        hidden = self.runner.execute(inputs)
        if not wanted:
            return {}
        logits = self.runner.compute_logits(hidden[last_rows])
        proposals = {req: Proposal([], None) for req in wanted}
        live = wanted
        for step in range(max(len(r.spec_token_ids) for r in wanted)):
            if step:  # each live request's latest proposal, right after the last known token
                live = [r for r in live if len(r.spec_token_ids) > step]
                feed = [
                    SeqInput([proposals[r].tokens[-1]], r.num_tokens - 1 + step, block_ids[r])
                    for r in live
                ]
                logits = self.runner.compute_logits(self.runner.execute(feed))
            for req, row in zip(live, logits):
                self._draw(req, row, proposals[req], generators.get(req))
        for req, proposal in proposals.items():
            req.spec_token_ids[:] = proposal.tokens
        return proposals

    def accepted(self, req: Request, num_tokens: int, proposed: int, accepted: int) -> None:
        """``accepted`` of ``proposed`` tokens after the request's first ``num_tokens`` were
        kept: the draft fed the kept ones but the last proposal."""
        self._done[req] = (req.num_preemptions, num_tokens + min(accepted, proposed - 1))

    def _start(self, req: Request, start: int) -> int:
        """Where the draft's input begins: at the target's, or earlier where an accepted
        proposal's draft KV is missing. A request first seen, or recomputed after a
        preemption, trusts what the prefix cache gave it."""
        preemptions, done = self._done.get(req, (-1, start))
        return start if preemptions != req.num_preemptions else min(done, start)

    def _draw(
        self,
        req: Request,
        logits: torch.Tensor,
        proposal: Proposal,
        generator: torch.Generator | None,
    ) -> None:
        params = req.sampling_params
        assert params is not None
        if params.greedy:
            proposal.tokens.append(int(logits.argmax()))
            return
        probs = torch.softmax(logits.float() / params.temperature, dim=-1)
        noise = torch.empty_like(probs).exponential_(generator=generator or self._generator)
        proposal.tokens.append(int((probs / noise).argmax()))
        row = probs[None]
        proposal.probs = row if proposal.probs is None else torch.cat([proposal.probs, row])


def _check(path: str, draft: object, target: ModelInfo, tokenizer: Tokenizer) -> None:
    """A draft must share the target's vocabulary and tokenizer, and its context."""
    if target.task != "generate" or target.is_encoder:
        raise ValueError(f"{_FIELD}: speculative decoding needs a generating target model")
    vocab = getattr(draft, "vocab_size", None)
    if vocab != target.vocab_size:
        raise ValueError(
            f"{_FIELD} ({path}) has a vocabulary of {vocab} tokens, the target model "
            f"{target.vocab_size}: the draft must share the target's tokenizer"
        )
    if Tokenizer(path).hf.get_vocab() != tokenizer.hf.get_vocab():
        raise ValueError(
            f"{_FIELD} ({path}) has a tokenizer other than the target model's: the draft "
            "must share it"
        )
    positions = getattr(draft, "max_position_embeddings", None)
    if positions is not None and positions < target.max_model_len:
        raise ValueError(
            f"{_FIELD} ({path}) reads at most {positions} positions, fewer than "
            f"max_model_len={target.max_model_len}"
        )
