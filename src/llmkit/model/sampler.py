"""Batched sampling on device: logits processors, penalties, top-k/p, min-p, seeds, logprobs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llmkit.model.transfer import Staging
from llmkit.sampling_params import SamplingParams
from llmkit.structured import GrammarMatcher
from llmkit.structured.bitmask import allocate_bitmask, apply_bitmask

_NEG_INF = float("-inf")
_TINY, _MAX = torch.finfo(torch.float32).tiny, torch.finfo(torch.float32).max
# The largest logit that the smallest temperature (1e-5) still leaves finite.
_LOGIT_MAX = _MAX * 1e-5 / 2


@dataclass
class SamplingRow:
    """What the sampler needs to know about one request for one step."""

    params: SamplingParams
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    eos_token_id: int | None
    generator: torch.Generator | None  # set for seeded requests
    matcher: GrammarMatcher | None = None  # set for structured-output requests


@dataclass
class SampledToken:
    token_id: int
    # (token id, logprob, rank) of the sampled token followed by the top-k; None if not asked.
    logprobs: list[tuple[int, float, int]] | None


class Sampled:
    """One step's sampled tokens. ``token_ids`` stays on the device, where the next step can
    read it before the host does; ``tokens()`` waits for the copies to the host (started
    here, behind the sampling on the device's stream) and reads them."""

    def __init__(
        self,
        token_ids: torch.Tensor,
        ranked: tuple[torch.Tensor, ...] | None,
        wanted: list[int | None],
        staging: Staging,
    ):
        self.token_ids = token_ids
        self._wanted = wanted  # each row's number of top logprobs; None: no logprobs
        self._host = [staging.to_host(t) for t in (token_ids, *(ranked or ()))]
        self._copied: torch.cuda.Event | None = None
        if token_ids.device.type == "cuda":
            self._copied = torch.cuda.Event()
            self._copied.record()

    def tokens(self) -> list[SampledToken]:
        if self._copied is not None:
            self._copied.synchronize()
        ids: list[int] = self._host[0].tolist()
        if len(self._host) == 1:
            return [SampledToken(t, None) for t in ids]
        ranked = _ranked_lists(ids, *self._host[1:])
        return [
            SampledToken(t, None if k is None else entries[: 1 + k])
            for t, k, entries in zip(ids, self._wanted, ranked)
        ]


class Sampler:
    def __init__(
        self,
        vocab_size: int,
        device: torch.device,
        seed: int = 0,
        staging: Staging | None = None,
    ):
        """``staging``: the runner's, whose step the sampling belongs to."""
        self.vocab_size = vocab_size
        self.device = device
        self.staging = staging or Staging(device)
        # Requests without a seed of their own draw from the engine's seeded stream, so a
        # run is reproducible from EngineConfig.seed (vLLM's --seed).
        self._generator = torch.Generator(device=device)
        self._generator.manual_seed(seed)

    def __call__(
        self,
        logits: torch.Tensor,
        rows: list[SamplingRow],
        drafts: list[int | None] | None = None,
        draft_probs: torch.Tensor | None = None,
    ) -> list[SampledToken]:
        """``sample``, waiting for its tokens."""
        return self.sample(logits, rows, drafts, draft_probs).tokens()

    @torch.inference_mode()
    def sample(
        self,
        logits: torch.Tensor,
        rows: list[SamplingRow],
        drafts: list[int | None] | None = None,
        draft_probs: torch.Tensor | None = None,
    ) -> Sampled:
        """One token per row, queued on the device without waiting for it.

        ``drafts``: a proposed token per row (speculative decoding) that a sampled row keeps
        with its probability, else replaces by a draw from the rest of its distribution: the
        token drawn still follows the row's distribution, and it equals the proposal exactly
        when the proposal is accepted (greedy: when it is the argmax). ``draft_probs``
        ``[rows, vocab]``: the distribution each proposal was drawn from (a draft model's);
        without it a proposal is taken as certain (n-gram)."""
        logits = logits.float()
        want_logprobs = [r.params.logprobs is not None for r in rows]
        raw = torch.log_softmax(logits, dim=-1) if any(want_logprobs) else None
        logits = logits.clone()
        self._apply_masks(logits, rows)
        self._apply_penalties(logits, rows)
        self._apply_grammars(logits, rows)

        # max's indices are argmax's (the first of equal maxima), at half its cost on CPU.
        tokens = logits.max(dim=-1).indices
        greedy = [r.params.greedy for r in rows]
        if not all(greedy):
            sampled = self._sample(logits, rows, drafts, draft_probs)
            greedy_rows = self.staging.to_device(greedy, torch.bool)
            tokens = torch.where(greedy_rows, tokens, sampled)
        wanted = [r.params.logprobs for r in rows]
        if raw is None:
            return Sampled(tokens, None, wanted, self.staging)
        ranked = _rank(raw, tokens, max(k or 0 for k in wanted))
        return Sampled(tokens, ranked, wanted, self.staging)

    def _apply_masks(self, logits: torch.Tensor, rows: list[SamplingRow]) -> None:
        for i, r in enumerate(rows):
            p = r.params
            if p.allowed_token_ids is not None:
                allowed = torch.tensor(p.allowed_token_ids, device=self.device)
                keep = torch.full_like(logits[i], _NEG_INF)
                keep[allowed] = 0.0
                logits[i] += keep
            if p.logit_bias:
                ids = torch.tensor(list(p.logit_bias), device=self.device)
                logits[i, ids] += torch.tensor(list(p.logit_bias.values()), device=self.device)
            if len(r.output_token_ids) < p.min_tokens:
                banned = list(p.stop_token_ids or ())
                if r.eos_token_id is not None and not p.ignore_eos:
                    banned.append(r.eos_token_id)
                if banned:
                    logits[i, banned] = _NEG_INF

    def _apply_grammars(self, logits: torch.Tensor, rows: list[SamplingRow]) -> None:
        """Only the tokens its grammar allows next stay possible for a constrained row."""
        constrained = [(i, r.matcher) for i, r in enumerate(rows) if r.matcher is not None]
        if not constrained:
            return
        bitmask = allocate_bitmask(len(constrained), self.vocab_size)
        for j, (_, matcher) in enumerate(constrained):
            matcher.fill_bitmask(bitmask, j)
        idx = [i for i, _ in constrained]
        sub = logits[idx]
        apply_bitmask(sub, bitmask)
        logits[idx] = sub

    def _apply_penalties(self, logits: torch.Tensor, rows: list[SamplingRow]) -> None:
        idx = [i for i, r in enumerate(rows) if r.params.needs_penalties]
        if not idx:
            return
        V = self.vocab_size
        dev = self.device
        out_counts = torch.zeros((len(idx), V), device=dev)
        seen = torch.zeros((len(idx), V), dtype=torch.bool, device=dev)
        for j, i in enumerate(idx):
            out = torch.tensor(rows[i].output_token_ids, dtype=torch.int64, device=dev)
            out_counts[j] = torch.bincount(out, minlength=V)[:V].float()
            prompt = torch.tensor(rows[i].prompt_token_ids, dtype=torch.int64, device=dev)
            seen[j, prompt] = True
        seen |= out_counts > 0
        params = [rows[i].params for i in idx]
        rep = torch.tensor([p.repetition_penalty for p in params], device=dev)[:, None]
        # A penalty past float32's range would round to 0 or inf (-inf * 0, 0 * inf: NaN).
        rep.clamp_(min=_TINY, max=_MAX)
        freq = torch.tensor([p.frequency_penalty for p in params], device=dev)[:, None]
        pres = torch.tensor([p.presence_penalty for p in params], device=dev)[:, None]
        sub = logits[idx]
        # vLLM's order: repetition (prompt and output), then frequency and presence (output).
        sub = torch.where(seen, torch.where(sub > 0, sub / rep, sub * rep), sub)
        # A tiny penalty can push a seen token to +inf, which softmax turns to NaN.
        sub.clamp_(max=_LOGIT_MAX)
        sub = sub - freq * out_counts - pres * (out_counts > 0).float()
        logits[idx] = sub

    def _sample(
        self,
        logits: torch.Tensor,
        rows: list[SamplingRow],
        drafts: list[int | None] | None,
        draft_probs: torch.Tensor | None,
    ) -> torch.Tensor:
        dev = self.device
        # Past float32's largest a temperature is inf, and -inf (a masked token) / inf NaN.
        temperatures = [min(max(r.params.temperature, 1e-5), _MAX) for r in rows]
        temps = self.staging.to_device(temperatures, torch.float32)
        logits = logits / temps[:, None]
        top_k = [r.params.top_k for r in rows]
        top_p = [r.params.top_p for r in rows]
        min_p = [r.params.min_p for r in rows]
        if any(k > 0 for k in top_k) or any(p < 1.0 for p in top_p):
            logits = _top_k_top_p(logits, top_k, top_p, self.staging)
        probs = torch.softmax(logits, dim=-1)
        if any(m > 0 for m in min_p):
            top = probs.max(-1, keepdim=True).values
            threshold = self.staging.to_device(min_p, torch.float32)[:, None] * top
            probs = torch.where(probs < threshold, 0.0, probs)
        # Exponential race (the Gumbel trick): argmax(p / q), q ~ Exp(1). A seeded request
        # draws its own noise from its own generator, so its tokens do not depend on the
        # batch it happens to share.
        accepted = proposed = None
        if drafts is not None and any(d is not None for d in drafts):
            accepted, probs = self._check_drafts(probs, rows, drafts, draft_probs)
            proposed = torch.tensor(_drafts_or_zero(drafts), device=dev)
        q = torch.empty_like(probs).exponential_(generator=self._generator)
        for i, r in enumerate(rows):
            if r.generator is not None:
                q[i].exponential_(generator=r.generator)
        tokens = (probs / q).argmax(dim=-1)
        if accepted is None or proposed is None:
            return tokens
        return torch.where(accepted, proposed, tokens)

    def _check_drafts(
        self,
        probs: torch.Tensor,
        rows: list[SamplingRow],
        drafts: list[int | None],
        q: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rejection sampling: accept proposal d, drawn from q, with probability
        min(1, p(d) / q(d)); a rejected row samples from max(p - q, 0), renormalized (the
        exponential race needs no renormalizing), so every row still draws from p. Without
        ``q`` the draft is one-hot (n-gram proposals): accept with p(d), else p without d."""
        dev = self.device
        u = torch.rand(len(rows), generator=self._generator, device=dev)
        for i, r in enumerate(rows):
            if r.generator is not None and drafts[i] is not None:
                u[i] = torch.rand((), generator=r.generator, device=dev)
        has = torch.tensor([d is not None for d in drafts], device=dev)
        d = torch.tensor(_drafts_or_zero(drafts), device=dev)
        probs = probs / probs.sum(-1, keepdim=True)  # min_p leaves its rows unnormalized
        p_d = probs.gather(1, d[:, None])[:, 0]
        if q is None:
            accepted = has & (u < p_d)
            rejected = has & ~accepted & (p_d < 1.0)
            probs = probs.clone()
            probs[rejected, d[rejected]] = 0.0
            return accepted, probs
        q = q.to(probs.device, probs.dtype)
        accepted = has & (u * q.gather(1, d[:, None])[:, 0] < p_d)
        residual = (probs - q).clamp_(min=0.0)
        # Where p <= q everywhere (p == q up to rounding) nothing is left: p itself then.
        rejected = has & ~accepted & (residual.sum(-1) > 0)
        return accepted, torch.where(rejected[:, None], residual, probs)

    @torch.inference_mode()
    def prompt_logprobs(
        self, logits: torch.Tensor, targets: list[int], k: int
    ) -> list[list[tuple[int, float, int]]]:
        """Each prompt position's actual next token and the top ``k``, from raw logits."""
        raw = torch.log_softmax(logits.float(), dim=-1)
        return _ranked_lists(targets, *_rank(raw, torch.tensor(targets, device=raw.device), k))


def _drafts_or_zero(drafts: list[int | None]) -> list[int]:
    return [0 if d is None else d for d in drafts]


def _rank(raw: torch.Tensor, tokens: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    """On the device: each row's logprob of ``tokens[row]`` and its rank, and the top ``k``
    logprobs and their ids."""
    chosen = raw.gather(1, tokens[:, None].long())
    ranks = (raw > chosen).sum(-1) + 1
    top_vals, top_ids = raw.topk(k, dim=-1) if k else (raw[:, :0], raw[:, :0])
    return chosen[:, 0], ranks, top_vals, top_ids.long()


def _ranked_lists(
    tokens: list[int],
    chosen: torch.Tensor,
    ranks: torch.Tensor,
    top_vals: torch.Tensor,
    top_ids: torch.Tensor,
) -> list[list[tuple[int, float, int]]]:
    """Per row: (token id, logprob, rank) of ``tokens[row]``, then of the top ones."""
    vals, ids = top_vals.tolist(), top_ids.tolist()
    return [
        [(tid, lp, rank)] + [(ids[i][j], vals[i][j], j + 1) for j in range(len(ids[i]))]
        for i, (tid, lp, rank) in enumerate(zip(tokens, chosen.tolist(), ranks.tolist()))
    ]


def _top_k_top_p(
    logits: torch.Tensor, top_k: list[int], top_p: list[float], staging: Staging
) -> torch.Tensor:
    """Mask everything outside each row's top-k and its top-p nucleus (one sort for both)."""
    dev = logits.device
    V = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    k = staging.to_device([kk if 0 < kk < V else V for kk in top_k], torch.int64)
    ranks = torch.arange(V, device=dev)[None, :]
    mask = ranks >= k[:, None]
    p = staging.to_device(top_p, torch.float32)[:, None]
    probs = torch.softmax(sorted_logits.masked_fill(mask, _NEG_INF), dim=-1)
    # Drop a token when the tokens before it already reach p; the top token always stays,
    # also when p is below float32's smallest number (it rounds to 0, which all would reach).
    mask |= (probs.cumsum(-1) - probs) >= p
    mask[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(mask, _NEG_INF)
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)
