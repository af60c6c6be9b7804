"""Plain data of the unix socket's protocol: params, outputs, stats, model info as msgpack values.

What comes from a peer is checked field by field; a wrong one raises
:class:`ProtocolError` naming it (``params.temperature``).
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from array import array
from typing import Any

from llmkit.engine.protocol import EngineOutput, ModelInfo
from llmkit.errors import ParamError
from llmkit.lora_request import LoRARequest
from llmkit.outputs import (
    CompletionOutput,
    EmbeddingOutput,
    EmbeddingRequestOutput,
    Logprob,
    PositionLogprobs,
    RequestOutput,
    SpecDecodeCounts,
)
from llmkit.protocol.messages import Message, ProtocolError, describe, kind_of, matches
from llmkit.sampling_params import (
    PoolingParams,
    RequestOutputKind,
    SamplingParams,
    StructuredOutputsParams,
)
from llmkit.types import EngineStats

Params = SamplingParams | PoolingParams

_OUTPUT_KINDS = {kind.value: kind for kind in RequestOutputKind}
# Each params class's fields and their types, for checking what a peer sends.
_HINTS: dict[type, dict[str, Any]] = {
    cls: typing.get_type_hints(cls) for cls in (SamplingParams, PoolingParams)
}


# ---- params -----------------------------------------------------------------------------


def params_to_wire(params: Params) -> Message:
    data = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    data["output_kind"] = params.output_kind.value
    if isinstance(params, SamplingParams) and params.structured_outputs is not None:
        data["structured_outputs"] = dataclasses.asdict(params.structured_outputs)
    return data


def params_from_wire(data: Message, cls: type[Params], where: str = "params") -> Params:
    """``cls`` built from ``data``, each field's type checked; errors name ``where.field``."""
    hints = _HINTS[cls]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        param = f"{where}.{key}"
        if key not in hints:
            raise ProtocolError(f"{param} is not a {cls.__name__} field", param)
        if key == "output_kind":
            if not (isinstance(value, int) and value in _OUTPUT_KINDS):
                raise ProtocolError(f"{param} must be 0, 1 or 2, got {value!r}", param)
            value = _OUTPUT_KINDS[value]
        elif key == "structured_outputs" and value is not None:
            value = _structured_from_wire(value, param)
        elif not matches(value, hints[key]):
            raise ProtocolError(
                f"{param} must be {describe(hints[key])}, got {kind_of(value)}", param
            )
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ProtocolError(str(exc), param_of(exc, where) or where) from None


def _structured_from_wire(value: Any, param: str) -> StructuredOutputsParams:
    names = {f.name for f in dataclasses.fields(StructuredOutputsParams)}
    if not (isinstance(value, dict) and set(value) <= names):
        raise ProtocolError(f"{param} must be a map with keys among {sorted(names)}", param)
    try:
        return StructuredOutputsParams(**value)
    except ValueError as exc:
        raise ProtocolError(str(exc), param) from None


def param_of(exc: ValueError, where: str = "params") -> str | None:
    """``where.field`` for the params field a ``ParamError`` names, else None."""
    if isinstance(exc, ParamError) and any(exc.param in hints for hints in _HINTS.values()):
        return f"{where}.{exc.param}"
    return None


# ---- outputs, stats, model info -------------------------------------------------------------


def output_to_wire(output: EngineOutput, first: bool) -> Message:
    """An output as plain data; only a request's ``first`` one carries its prompt."""
    data: Message = {"finished": output.finished}
    if first:
        data["prompt"] = output.prompt
        data["prompt_token_ids"] = output.prompt_token_ids
    if isinstance(output, EmbeddingRequestOutput):
        data["embedding"] = _float32_bytes(output.outputs.embedding)
        return data
    data["num_cached_tokens"] = output.num_cached_tokens
    data["prompt_logprobs"] = (
        None
        if output.prompt_logprobs is None
        else [None if p is None else _logprobs_to_wire(p) for p in output.prompt_logprobs]
    )
    data["outputs"] = [
        {
            "index": c.index,
            "text": c.text,
            "token_ids": c.token_ids,
            "cumulative_logprob": c.cumulative_logprob,
            "logprobs": None if c.logprobs is None else [_logprobs_to_wire(p) for p in c.logprobs],
            "finish_reason": c.finish_reason,
            "stop_reason": c.stop_reason,
        }
        for c in output.outputs
    ]
    if output.spec_decode is not None:
        data["spec_decode"] = list(dataclasses.astuple(output.spec_decode))
    return data


def output_from_wire(data: Message, request_id: str) -> EngineOutput:
    """The engine's output back from :func:`output_to_wire`; the prompt is None unless sent."""
    prompt, prompt_ids = data.get("prompt"), data.get("prompt_token_ids") or []
    if "embedding" in data:
        embedding = EmbeddingOutput(_floats(data["embedding"]))
        return EmbeddingRequestOutput(request_id, prompt, prompt_ids, embedding, data["finished"])
    prompt_logprobs = data["prompt_logprobs"]
    return RequestOutput(
        request_id=request_id,
        prompt=prompt,
        prompt_token_ids=prompt_ids,
        prompt_logprobs=None
        if prompt_logprobs is None
        else [None if p is None else _logprobs_from_wire(p) for p in prompt_logprobs],
        outputs=[
            CompletionOutput(
                index=c["index"],
                text=c["text"],
                token_ids=c["token_ids"],
                cumulative_logprob=c["cumulative_logprob"],
                logprobs=None
                if c["logprobs"] is None
                else [_logprobs_from_wire(p) for p in c["logprobs"]],
                finish_reason=c["finish_reason"],
                stop_reason=c["stop_reason"],
            )
            for c in data["outputs"]
        ],
        finished=data["finished"],
        num_cached_tokens=data["num_cached_tokens"],
        spec_decode=None if "spec_decode" not in data else SpecDecodeCounts(*data["spec_decode"]),
    )


def stats_to_wire(stats: EngineStats) -> Message:
    return dataclasses.asdict(stats)


def stats_from_wire(data: Message) -> EngineStats:
    buckets = tuple(data.get("queue_wait_buckets", ()))
    return EngineStats(**{**data, "queue_wait_buckets": buckets})


def model_info_to_wire(info: ModelInfo) -> Message:
    return dataclasses.asdict(info)


def model_info_from_wire(data: Message) -> ModelInfo:
    return ModelInfo(**data)


def _logprobs_to_wire(position: PositionLogprobs) -> list[list[Any]]:
    # Maps with int keys are not portable (JSON); a list keeps the engine's order too.
    return [[token, lp.logprob, lp.rank, lp.decoded_token] for token, lp in position.items()]


def _logprobs_from_wire(position: list[list[Any]]) -> PositionLogprobs:
    return {token: Logprob(logprob, rank, text) for token, logprob, rank, text in position}


def _float32_bytes(values: list[float]) -> bytes:
    data = array("f", values)
    if sys.byteorder == "big":
        data.byteswap()
    return data.tobytes()


def _floats(data: bytes) -> list[float]:
    values = array("f")
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def lora_from_wire(value: list[str | int] | None) -> LoRARequest | None:
    """A submit's ``lora``: ``[name, id, path]``, or None for the base model."""
    if value is None:
        return None
    name, lora_id, path = value if len(value) == 3 else (None, None, None)
    if not (isinstance(name, str) and isinstance(lora_id, int) and isinstance(path, str)):
        raise ProtocolError("lora must be [name, id, path]", "lora")
    try:
        return LoRARequest(name, lora_id, path)
    except ValueError as exc:
        raise ProtocolError(str(exc), "lora") from None
