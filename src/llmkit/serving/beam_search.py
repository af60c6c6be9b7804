"""``use_beam_search`` on /v1/completions (vLLM's extra field): the request's beam settings.

``best_of`` beams (``n`` when not given) are searched and the best ``n`` become the
choices; vLLM's beam search runs to its end before it answers, so it does not stream.
"""

from __future__ import annotations

from llmkit.engine.beam_search import BeamSearchParams
from llmkit.protocol.openai import CompletionRequest
from llmkit.serving.errors import bad_request


def beam_search_params(
    req: CompletionRequest, max_tokens: int, max_logprobs: int
) -> BeamSearchParams:
    """The engine's beam search for ``req``; a 400 names the field that cannot be served."""
    if req.stream:
        raise bad_request("stream is not supported with use_beam_search", "stream")
    width = req.n if req.best_of is None else req.best_of
    if req.n > width:
        raise bad_request(
            f"best_of must be >= n ({req.n}) with use_beam_search, got {req.best_of}", "best_of"
        )
    if 2 * width > max_logprobs:
        # Each step reads the top 2 * width candidates of every beam.
        raise bad_request(
            f"beam search over {width} beams reads {2 * width} logprobs a step, more than "
            f"the engine allows (max_logprobs={max_logprobs})",
            "n" if req.best_of is None else "best_of",
        )
    return BeamSearchParams(
        beam_width=width,
        max_tokens=max_tokens,
        ignore_eos=req.ignore_eos,
        temperature=1.0 if req.temperature is None else req.temperature,  # vLLM's default
        length_penalty=req.length_penalty,
        include_stop_str_in_output=req.include_stop_str_in_output,
        early_stopping=req.early_stopping,
    )
