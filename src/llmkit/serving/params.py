"""OpenAI request fields -> SamplingParams, with errors that name the request's parameter."""

from __future__ import annotations

from typing import Any, TypeVar

from llmkit.engine.sched.context_window import completion_budget
from llmkit.errors import ParamError
from llmkit.protocol.openai import SamplingFields
from llmkit.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams
from llmkit.serving.errors import bad_request, from_value_error

# The names an engine error may start with; a request may call some of them otherwise.
T = TypeVar("T")


def build_sampling_params(
    req: SamplingFields,
    *,
    max_tokens: int | None,
    logprobs: int | None,
    prompt_logprobs: int | None,
    structured_outputs: dict[str, Any] | None = None,
) -> SamplingParams:
    """The engine's parameters for a completion or chat request.

    Outputs come as deltas in both modes: a stream forwards them, a plain request joins
    them, and either way the metrics see every token as it arrives. Limits that depend on
    the engine (``max_logprobs``, the vocabulary) are checked once, when it starts them.
    ``structured_outputs`` is the request's constraint, from ``structured_outputs`` or
    ``response_format``.
    """
    try:
        return SamplingParams(
            n=req.n,
            presence_penalty=req.presence_penalty,
            frequency_penalty=req.frequency_penalty,
            repetition_penalty=_default(req.repetition_penalty, 1.0),
            temperature=_default(req.temperature, 1.0),
            top_p=_default(req.top_p, 1.0),
            top_k=_default(req.top_k, 0),
            min_p=_default(req.min_p, 0.0),
            seed=req.seed,
            stop=req.stop,
            stop_token_ids=req.stop_token_ids,
            ignore_eos=req.ignore_eos,
            max_tokens=max_tokens,
            min_tokens=req.min_tokens,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
            skip_special_tokens=req.skip_special_tokens,
            spaces_between_special_tokens=req.spaces_between_special_tokens,
            include_stop_str_in_output=req.include_stop_str_in_output,
            logit_bias=_logit_bias(req.logit_bias),
            output_kind=RequestOutputKind.DELTA,
            structured_outputs=(
                None
                if structured_outputs is None
                else StructuredOutputsParams.of(structured_outputs)
            ),
        )
    except ValueError as exc:
        raise from_value_error(exc) from None


def check_context_length(
    prompt_len: int, max_tokens: int | None, max_model_len: int, what: str
) -> None:
    """Prompt plus requested completion must fit the context, as vLLM and OpenAI check: a
    400 with the counts (the engine's own rule, ``completion_budget``, checked before any
    work starts)."""
    try:
        completion_budget(prompt_len, max_tokens, max_model_len, what)
    except ParamError as exc:
        raise bad_request(str(exc), what, "context_length_exceeded") from None


def _default(value: T | None, default: T) -> T:
    return default if value is None else value


def _logit_bias(bias: dict[str, float] | None) -> dict[int, float] | None:
    if not bias:
        return None
    out: dict[int, float] = {}
    for key, value in bias.items():
        # Decimal digits only: int() would also take " 5", "+5" and "5_0".
        if not (key.isascii() and key.isdecimal()):
            raise bad_request(f"logit_bias keys must be token ids, got {key!r}", "logit_bias")
        out[int(key)] = value  # the values' range is the request model's
    return out
