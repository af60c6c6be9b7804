"""Stop conditions for one sequence after it gains a token: pure, no model needed.

The order is vLLM's: a stop token (EOS unless ignored, or one of ``stop_token_ids``)
ends the sequence before its text is searched for stop strings; then the length limits.
Nothing may stop a sequence before it has ``min_tokens`` tokens, except length and a
completed structured-output grammar, which allows nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llmkit.engine.sched.context_window import context_room
from llmkit.engine.sched.request import Request, RequestStatus

# Adds the token's text to the sequence's; returns the stop string it completed, if any.
# Its argument says whether stop strings may end the sequence yet (``min_tokens``).
Detokenize = Callable[[bool], "str | None"]


@dataclass(frozen=True)
class Stop:
    status: RequestStatus  # FINISHED_STOPPED or FINISHED_LENGTH
    reason: int | str | None = None  # the stop token id or stop string, as vLLM reports it


def check_stop(
    req: Request,
    token_id: int,
    detokenize: Detokenize,
    max_model_len: int,
    grammar_done: bool = False,
) -> Stop | None:
    """Whether ``req``, whose last output token is ``token_id``, is done, and why.

    ``detokenize`` runs unless a stop token ended the sequence and its text is not wanted
    (``include_stop_str_in_output``), so stopped text never shows a token it should not.
    ``grammar_done``: its structured-output grammar is complete, which stops it even on
    its last allowed token (a grammar left incomplete there ends with "length").
    """
    params = req.sampling_params
    assert params is not None, "only generation requests have stop conditions"
    can_stop = req.num_output_tokens >= params.min_tokens
    stop: Stop | None = None
    if can_stop and not params.ignore_eos and token_id == req.eos_token_id:
        stop = Stop(RequestStatus.FINISHED_STOPPED)
    elif can_stop and token_id in (params.stop_token_ids or ()):
        stop = Stop(RequestStatus.FINISHED_STOPPED, token_id)
    if stop is None or params.include_stop_str_in_output:
        stop_string = detokenize(can_stop)
        if stop_string is not None and stop is None:
            stop = Stop(RequestStatus.FINISHED_STOPPED, stop_string)
    if stop is None and grammar_done:
        stop = Stop(RequestStatus.FINISHED_STOPPED)
    if stop is None and (
        req.num_output_tokens >= req.max_tokens or context_room(req.num_tokens, max_model_len) == 0
    ):
        stop = Stop(RequestStatus.FINISHED_LENGTH)
    return stop
