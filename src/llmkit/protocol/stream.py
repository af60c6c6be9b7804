"""The stream protocol of the non-HTTP transports (unix socket, WebSocket): messages as plain data.

Every message is a map with a ``"type"``. The client speaks first::

    client                                        server
    hello {version}                         ->
                                            <-    hello {version, model_info, stats, healthy,
                                                         max_frame_bytes}
    generate {id, prompt, params, priority} ->
    encode {id, prompt, params, priority}   ->
                                            <-    output {id, output} ... then final {id, output}
                                            <-    error {id?, error: {message, type, param, code}}
    abort {id}                              ->    (the request ends with a final output, "abort")
    close {id}                              ->    (the reader is gone: abort, send nothing more)
    stats {} / health {}                    ->    stats {stats, healthy} / health {healthy}
                                            <-    stats {stats, healthy}, pushed when they change

Ids are the client's: strings unique among its open requests on one connection. A
``prompt`` is text, token ids, or ``{"prompt": text, "prompt_token_ids": ids}``; ``params``
holds SamplingParams (generate) or PoolingParams (encode) fields. Outputs are the engine's
own (deltas when the client asks for ``output_kind`` DELTA); the first output of a request
carries its prompt, the others leave it out. Embeddings travel as little-endian float32
bytes. An ``error`` answers a message that cannot be served, naming the field at fault.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from array import array
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, Union

from llmkit.engine.protocol import EngineOutput, ModelInfo, PromptType
from llmkit.engine.stats import EngineStats
from llmkit.errors import EngineDeadError, RequestFailedError
from llmkit.outputs import (
    CompletionOutput,
    EmbeddingOutput,
    EmbeddingRequestOutput,
    Logprob,
    PositionLogprobs,
    RequestOutput,
)
from llmkit.sampling_params import PoolingParams, RequestOutputKind, SamplingParams

PROTOCOL_VERSION = 1
MAX_ID_LENGTH = 256

Message = dict[str, Any]
Params = Union[SamplingParams, PoolingParams]


class ProtocolError(ValueError):
    """A message that cannot be served; it becomes an ``error`` message."""

    def __init__(
        self,
        message: str,
        param: str | None = None,
        code: str = "invalid_message",
        request_id: str | None = None,
        error_type: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.param = param
        self.code = code
        self.request_id = request_id
        self.error_type = error_type

    def to_message(self) -> Message:
        return error_message(
            str(self), param=self.param, code=self.code, request_id=self.request_id,
            error_type=self.error_type,
        )


# ---- client -> server ---------------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    version: int


@dataclass(frozen=True)
class Submit:
    """A ``generate`` or ``encode`` request."""

    kind: Literal["generate", "encode"]
    id: str
    prompt: PromptType
    params: Params
    priority: int


@dataclass(frozen=True)
class Abort:
    id: str


@dataclass(frozen=True)
class Close:
    id: str


@dataclass(frozen=True)
class Query:
    kind: Literal["stats", "health"]


ClientMessage = Union[Hello, Submit, Abort, Close, Query]


def parse_client_message(obj: object) -> ClientMessage:
    """The message ``obj`` holds; raises :class:`ProtocolError` naming what is wrong."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"a message must be a map, got {_kind(obj)}")
    kind = obj.get("type")
    if kind == "hello":
        return Hello(_get(obj, "version", int))
    if kind in ("generate", "encode"):
        rid = _id(obj)
        try:
            return Submit(
                kind=kind,
                id=rid,
                prompt=_prompt(obj.get("prompt", _MISSING)),
                params=params_from_wire(
                    _get(obj, "params", dict, {}), SamplingParams if kind == "generate" else PoolingParams
                ),
                priority=_get(obj, "priority", int, 0),
            )
        except ProtocolError as exc:
            exc.request_id = rid
            raise
    if kind == "abort":
        return Abort(_id(obj))
    if kind == "close":
        return Close(_id(obj))
    if kind in ("stats", "health"):
        return Query(kind)
    if not isinstance(kind, str):
        raise ProtocolError(f"type must be a string, got {_kind(kind)}", "type")
    raise ProtocolError(
        f"unknown message type {kind!r}; expected hello, generate, encode, abort, close, stats "
        "or health",
        "type",
    )


def hello_request() -> Message:
    return {"type": "hello", "version": PROTOCOL_VERSION}


def submit_request(kind: str, rid: str, prompt: PromptType, params: Params, priority: int) -> Message:
    return {"type": kind, "id": rid, "prompt": prompt, "params": params_to_wire(params), "priority": priority}


def abort_request(rid: str) -> Message:
    return {"type": "abort", "id": rid}


def close_request(rid: str) -> Message:
    return {"type": "close", "id": rid}


# ---- server -> client ---------------------------------------------------------------------


def hello_reply(info: ModelInfo, stats: EngineStats, healthy: bool, max_frame_bytes: int) -> Message:
    """The server's answer to ``hello``: its model, its state, the largest message it takes."""
    return {
        "type": "hello",
        "version": PROTOCOL_VERSION,
        "model_info": dataclasses.asdict(info),
        "stats": dataclasses.asdict(stats),
        "healthy": healthy,
        "max_frame_bytes": max_frame_bytes,
    }


def stats_message(stats: EngineStats, healthy: bool) -> Message:
    return {"type": "stats", "stats": dataclasses.asdict(stats), "healthy": healthy}


def health_message(healthy: bool) -> Message:
    return {"type": "health", "healthy": healthy}


def output_message(rid: str, output: EngineOutput, first: bool) -> Message:
    """An ``output``, or the request's ``final`` one; only the first carries the prompt."""
    return {"type": "final" if output.finished else "output", "id": rid, "output": output_to_wire(output, first)}


def error_message(
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    request_id: str | None = None,
    error_type: str = "invalid_request_error",
) -> Message:
    """An error in OpenAI's shape, with the request's id when it is about one request."""
    error = {"message": message, "type": error_type, "param": param, "code": code}
    return {"type": "error", "id": request_id, "error": error}


_LEADING_NAME = re.compile(r"^([a-z_][a-z0-9_]*)\b")


def engine_error_message(rid: str, exc: Exception) -> Message:
    """The error message for an engine's ValueError (bad input) or LLMKitError (its failure)."""
    if isinstance(exc, ValueError):
        match = _LEADING_NAME.match(str(exc))
        names = _field_names(SamplingParams) | _field_names(PoolingParams)
        param = f"params.{match.group(1)}" if match and match.group(1) in names else None
        return error_message(str(exc), param=param, request_id=rid)
    if isinstance(exc, EngineDeadError):
        return error_message(str(exc), code="engine_dead", request_id=rid, error_type="service_unavailable")
    return error_message(str(exc), code="request_failed", request_id=rid, error_type="server_error")


def error_from_wire(error: Message) -> Exception:
    """The exception an engine would have raised for an ``error`` message's body."""
    message = str(error.get("message"))
    if error.get("code") == "engine_dead":
        return EngineDeadError(message)
    if error.get("type") == "invalid_request_error":
        return ValueError(message)
    return RequestFailedError(message)


# ---- plain data -------------------------------------------------------------------------


def params_to_wire(params: Params) -> Message:
    data = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    data["output_kind"] = params.output_kind.value
    return data


def params_from_wire(data: Message, cls: type[Params], where: str = "params") -> Params:
    """``cls`` built from ``data``, each field's type checked; errors name ``where.field``."""
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        param = f"{where}.{key}"
        if key not in hints:
            raise ProtocolError(f"{param} is not a {cls.__name__} field", param)
        if key == "output_kind":
            if not (isinstance(value, int) and value in _OUTPUT_KINDS):
                raise ProtocolError(f"{param} must be 0, 1 or 2, got {value!r}", param)
            value = _OUTPUT_KINDS[value]
        elif not _matches(value, hints[key]):
            raise ProtocolError(f"{param} must be {_describe(hints[key])}, got {_kind(value)}", param)
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except ValueError as exc:
        match = _LEADING_NAME.match(str(exc))
        raise ProtocolError(str(exc), f"{where}.{match.group(1)}" if match else where) from None


def output_to_wire(output: EngineOutput, first: bool) -> Message:
    data: Message = {"finished": output.finished}
    if first:
        data["prompt"] = output.prompt
        data["prompt_token_ids"] = output.prompt_token_ids
    if isinstance(output, EmbeddingRequestOutput):
        data["embedding"] = _float32_bytes(output.outputs.embedding)
        return data
    data["num_cached_tokens"] = output.num_cached_tokens
    data["prompt_logprobs"] = (
        None if output.prompt_logprobs is None
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
        prompt_logprobs=None if prompt_logprobs is None else [
            None if p is None else _logprobs_from_wire(p) for p in prompt_logprobs
        ],
        outputs=[
            CompletionOutput(
                index=c["index"],
                text=c["text"],
                token_ids=c["token_ids"],
                cumulative_logprob=c["cumulative_logprob"],
                logprobs=None if c["logprobs"] is None else [_logprobs_from_wire(p) for p in c["logprobs"]],
                finish_reason=c["finish_reason"],
                stop_reason=c["stop_reason"],
            )
            for c in data["outputs"]
        ],
        finished=data["finished"],
        num_cached_tokens=data["num_cached_tokens"],
    )


def stats_from_wire(data: Message) -> EngineStats:
    return EngineStats(**data)


def model_info_from_wire(data: Message) -> ModelInfo:
    return ModelInfo(**data)


# ---- helpers ----------------------------------------------------------------------------

_MISSING = object()
_OUTPUT_KINDS = {kind.value: kind for kind in RequestOutputKind}


def _kind(value: object) -> str:
    return "nothing" if value is _MISSING else "null" if value is None else type(value).__name__


def _get(obj: Message, name: str, kind: type, default: Any = _MISSING) -> Any:
    value = obj.get(name, _MISSING)
    if value is _MISSING and default is not _MISSING:
        return default
    if not _matches(value, kind):
        raise ProtocolError(f"{name} must be {_describe(kind)}, got {_kind(value)}", name)
    return value


def _id(obj: Message) -> str:
    rid = _get(obj, "id", str)
    if not 0 < len(rid) <= MAX_ID_LENGTH:
        raise ProtocolError(f"id must be 1 to {MAX_ID_LENGTH} characters long, got {len(rid)}", "id")
    return rid


def _prompt(value: object) -> PromptType:
    if isinstance(value, str) or _matches(value, list[int]):
        return value  # type: ignore[return-value]
    if isinstance(value, dict):
        extra = set(value) - {"prompt", "prompt_token_ids"}
        if extra:
            raise ProtocolError(f"prompt.{sorted(extra)[0]} is not a prompt field", "prompt")
        if "prompt_token_ids" in value and not _matches(value["prompt_token_ids"], list[int]):
            raise ProtocolError("prompt.prompt_token_ids must be a list of int", "prompt.prompt_token_ids")
        if "prompt" in value and not _matches(value["prompt"], Union[str, None]):
            raise ProtocolError("prompt.prompt must be a string or null", "prompt.prompt")
        return value
    raise ProtocolError(
        f"prompt must be a string, a list of int, or a map with prompt_token_ids; got {_kind(value)}",
        "prompt",
    )


def _matches(value: object, hint: Any) -> bool:
    """Whether ``value`` (plain data) has the type ``hint`` names; bools are not numbers."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_matches(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint in (int, float):
        numbers = (int,) if hint is int else (int, float)
        return isinstance(value, numbers) and not isinstance(value, bool)
    if origin is list:
        return isinstance(value, list) and all(_matches(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _matches(k, args[0]) and _matches(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if hint is dict:
        return "a map"
    if typing.get_origin(hint) is list:
        return f"a list of {_describe(typing.get_args(hint)[0])}"
    if typing.get_origin(hint) is dict:
        key, value = typing.get_args(hint)
        return f"a map of {_describe(key)} to {_describe(value)}"
    return hint.__name__


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


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
