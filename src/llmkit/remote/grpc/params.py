"""vLLM's gRPC ``SamplingParams`` (proto3, where zero means unset) -> llmkit's SamplingParams."""

from __future__ import annotations

from typing import Any

from llmkit.errors import ParamError
from llmkit.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams


def sampling_params(proto: Any, stream: bool) -> SamplingParams:
    """The engine's parameters for a Generate request's ``sampling_params``; raises
    ``ParamError`` (a ``ValueError``) naming the field for a bad value."""
    has = proto.HasField
    if has("seed") and proto.seed < 0:
        # The proto's seed is an int32 that vLLM's server takes as unsigned; a negative one
        # is a client's mistake, not a seed.
        raise ParamError("seed", f"seed must be non-negative, got {proto.seed}")
    return SamplingParams(
        # temperature is `optional`: an explicit 0 is greedy, left out is vLLM's default 1.
        temperature=proto.temperature if has("temperature") else 1.0,
        top_p=proto.top_p or 1.0,
        top_k=proto.top_k,
        min_p=proto.min_p,
        frequency_penalty=proto.frequency_penalty,
        presence_penalty=proto.presence_penalty,
        repetition_penalty=proto.repetition_penalty or 1.0,
        # Left out: until the end of the context, as vLLM's server does.
        max_tokens=proto.max_tokens if has("max_tokens") else None,
        min_tokens=proto.min_tokens,
        stop=list(proto.stop),
        stop_token_ids=list(proto.stop_token_ids),
        skip_special_tokens=proto.skip_special_tokens,
        spaces_between_special_tokens=proto.spaces_between_special_tokens,
        ignore_eos=proto.ignore_eos,
        n=proto.n or 1,
        logprobs=proto.logprobs if has("logprobs") else None,
        prompt_logprobs=proto.prompt_logprobs if has("prompt_logprobs") else None,
        seed=proto.seed if has("seed") else None,
        include_stop_str_in_output=proto.include_stop_str_in_output,
        logit_bias=dict(proto.logit_bias) or None,
        structured_outputs=_constraint(proto),
        output_kind=RequestOutputKind.DELTA if stream else RequestOutputKind.FINAL_ONLY,
    )


def truncation(proto: Any) -> int | None:
    """``truncate_prompt_tokens``: keep the prompt's last N ids (-1: the context length)."""
    return proto.truncate_prompt_tokens if proto.HasField("truncate_prompt_tokens") else None


def _constraint(proto: Any) -> StructuredOutputsParams | None:
    kind = proto.WhichOneof("constraint")
    if kind is None:
        return None
    if kind == "json_schema":
        return StructuredOutputsParams(json=proto.json_schema)
    if kind == "choice":
        return StructuredOutputsParams(choice=list(proto.choice.choices))
    if kind == "json_object":
        return StructuredOutputsParams(json_object=proto.json_object) if proto.json_object else None
    if kind in ("regex", "grammar"):
        return StructuredOutputsParams(**{kind: getattr(proto, kind)})
    raise ParamError(f"sampling_params.{kind}", f"the {kind} constraint is not supported")
