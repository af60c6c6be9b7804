"""How a sampled token lands in its request's output: ids, logprobs, text, stop check."""

from __future__ import annotations

from collections.abc import Callable

import torch

from llmkit.engine.core.output_state import RequestState
from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.stop import check_stop
from llmkit.model.sampler import SampledToken, Sampler
from llmkit.outputs import Logprob, PositionLogprobs

TokenText = Callable[[int], str]


def position_logprobs(entries: list[tuple[int, float, int]], text: TokenText) -> PositionLogprobs:
    return {tid: Logprob(lp, rank, text(tid)) for tid, lp, rank in entries}


def record_token(
    state: RequestState,
    req: Request,
    token: SampledToken,
    text: TokenText,
    max_model_len: int,
    finish: Callable[[RequestStatus], None],
) -> bool:
    """Add ``token``, which ``req`` already holds as its last output, to ``req``'s completion
    in ``state`` (its id, logprobs and text); if ``req`` stops there, ``finish`` it with the
    reason, all under the state's lock. Returns whether it stopped."""
    comp = state.completions[req.index]
    tid = token.token_id
    with state.lock:
        state.num_cached_tokens = max(req.num_cached_tokens, 0)
        comp.token_ids.append(tid)
        if token.logprobs is not None:
            comp.cumulative_logprob += token.logprobs[0][1]
            comp.logprobs.append(position_logprobs(token.logprobs, text))
        detokenizer = comp.detokenizer
        assert detokenizer is not None
        stop = check_stop(
            req,
            tid,
            lambda can_stop: detokenizer.update(tid, check_stop=can_stop),
            max_model_len,
            grammar_done=req.matcher is not None and req.matcher.is_terminated(),
        )
        if stop is None:
            return False
        finish(stop.status)
        comp.finish_reason = req.finish_reason
        comp.stop_reason = stop.reason
        return True


def record_prompt_logprobs(
    state: RequestState,
    req: Request,
    first: int,
    logits: torch.Tensor,
    sampler: Sampler,
    text: TokenText,
) -> None:
    """Add the prompt positions from ``first`` that ``logits`` covers to ``state``'s prompt
    logprobs: each position's actual next token and the top ones."""
    assert req.sampling_params is not None and state.prompt_logprobs is not None
    targets = req.prompt_token_ids[first + 1 : first + 1 + len(logits)]
    ranked = sampler.prompt_logprobs(logits, targets, req.sampling_params.prompt_logprobs or 0)
    positions = [position_logprobs(entries, text) for entries in ranked]
    with state.lock:
        state.prompt_logprobs.extend(positions)
