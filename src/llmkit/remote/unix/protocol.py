"""The unix socket's protocol between an engine and its EngineClients: messages as plain data.

Every message is a map with a ``"type"``. The client speaks first::

    client                                        server
    hello {version}                         ->
                                            <-    hello {version, model_info, stats, healthy,
                                                         max_frame_bytes}
    generate {id, prompt, params, priority, lora?} ->
    encode {id, prompt, params, priority}   ->
                                            <-    output {id, output} ... then final {id, output}
                                            <-    error {id?, error: {message, type, param, code}}
    abort {id}                              ->    (the request ends with a final output, "abort")
    close {id}                              ->    (the reader is gone: abort, send nothing more)
    stats {} / health {}                    ->    stats {stats, healthy} / health {healthy}
                                            <-    stats {stats, healthy}, pushed when they change

Ids are the client's: strings unique among its open requests on one connection. A
``prompt`` is text, token ids, or ``{"prompt": text, "prompt_token_ids": ids}``; ``params``
holds SamplingParams (generate) or PoolingParams (encode) fields; ``lora`` is an optional
LoRA adapter, ``[name, id, path]``, as ``LoRARequest`` has them. Outputs are the engine's
own (deltas when the client asks for ``output_kind`` DELTA); the first output of a request
carries its prompt, the others leave it out. Embeddings travel as little-endian float32
bytes (see :mod:`llmkit.remote.unix.data`). An ``error`` answers a message that
cannot be served, naming the field at fault; a string that is not valid UTF-8 is one
(code ``invalid_text``), answered without quoting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llmkit.engine.protocol import EngineOutput, ModelInfo, PromptType
from llmkit.errors import EngineDeadError, EngineOverloadedError, ParamError, RequestFailedError
from llmkit.lora_request import LoRARequest
from llmkit.protocol.messages import (
    MISSING,
    Message,
    ProtocolError,
    error_message,
    field_of,
    kind_of,
    matches,
    request_id_of,
)
from llmkit.protocol.text import unencodable_message, unencodable_path
from llmkit.remote.unix.data import (
    Params,
    lora_from_wire,
    model_info_to_wire,
    output_to_wire,
    param_of,
    params_from_wire,
    params_to_wire,
    stats_to_wire,
)
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats

PROTOCOL_VERSION = 1


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
    lora: LoRARequest | None = None


@dataclass(frozen=True)
class Abort:
    id: str


@dataclass(frozen=True)
class Close:
    id: str


@dataclass(frozen=True)
class Query:
    kind: Literal["stats", "health"]


ClientMessage = Hello | Submit | Abort | Close | Query


def parse_client_message(obj: object) -> ClientMessage:
    """The message ``obj`` holds; raises :class:`ProtocolError` naming what is wrong."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"a message must be a map, got {kind_of(obj)}")
    kind = obj.get("type")
    if kind == "hello":
        return Hello(field_of(obj, "version", int))
    if kind in ("generate", "encode"):
        rid = request_id_of(obj)
        try:
            if (bad := unencodable_path(obj)) is not None:
                raise ProtocolError(unencodable_message(bad), bad or None, "invalid_text")
            return Submit(
                kind=kind,
                id=rid,
                prompt=_prompt(obj.get("prompt", MISSING)),
                params=params_from_wire(
                    field_of(obj, "params", dict, {}),
                    SamplingParams if kind == "generate" else PoolingParams,
                ),
                priority=field_of(obj, "priority", int, 0),
                lora=lora_from_wire(field_of(obj, "lora", list[str | int] | None, None)),
            )
        except ProtocolError as exc:
            exc.request_id = rid
            raise
    if kind == "abort":
        return Abort(request_id_of(obj))
    if kind == "close":
        return Close(request_id_of(obj))
    if kind in ("stats", "health"):
        return Query(kind)
    if not isinstance(kind, str):
        raise ProtocolError(f"type must be a string, got {kind_of(kind)}", "type")
    raise ProtocolError(
        f"unknown message type {kind!r}; expected hello, generate, encode, abort, close, stats "
        "or health",
        "type",
    )


def hello_request() -> Message:
    return {"type": "hello", "version": PROTOCOL_VERSION}


def submit_request(
    kind: str,
    rid: str,
    prompt: PromptType,
    params: Params,
    priority: int,
    lora: LoRARequest | None = None,
) -> Message:
    message: Message = {
        "type": kind,
        "id": rid,
        "prompt": prompt,
        "params": params_to_wire(params),
        "priority": priority,
    }
    if lora is not None:
        message["lora"] = [lora.name, lora.id, lora.path]
    return message


def abort_request(rid: str) -> Message:
    return {"type": "abort", "id": rid}


def close_request(rid: str) -> Message:
    return {"type": "close", "id": rid}


# ---- server -> client ---------------------------------------------------------------------


def hello_reply(
    info: ModelInfo, stats: EngineStats, healthy: bool, max_frame_bytes: int
) -> Message:
    """The server's answer to ``hello``: its model, its state, the largest message it takes."""
    return {
        "type": "hello",
        "version": PROTOCOL_VERSION,
        "model_info": model_info_to_wire(info),
        "stats": stats_to_wire(stats),
        "healthy": healthy,
        "max_frame_bytes": max_frame_bytes,
    }


def stats_message(stats: EngineStats, healthy: bool) -> Message:
    return {"type": "stats", "stats": stats_to_wire(stats), "healthy": healthy}


def health_message(healthy: bool) -> Message:
    return {"type": "health", "healthy": healthy}


def output_message(rid: str, output: EngineOutput, first: bool) -> Message:
    """An ``output``, or the request's ``final`` one; only the first carries the prompt."""
    return {
        "type": "final" if output.finished else "output",
        "id": rid,
        "output": output_to_wire(output, first),
    }


def engine_error_message(rid: str, exc: Exception) -> Message:
    """The error message for an engine's ValueError (bad input) or LLMKitError (its failure)."""
    if isinstance(exc, ValueError):
        return error_message(str(exc), param=param_of(exc), request_id=rid)
    if isinstance(exc, EngineOverloadedError):
        return overloaded_message(exc, rid)
    if isinstance(exc, EngineDeadError):
        return error_message(
            str(exc), code="engine_dead", request_id=rid, error_type="service_unavailable"
        )
    return error_message(str(exc), code="request_failed", request_id=rid, error_type="server_error")


def overloaded_body(exc: EngineOverloadedError) -> Message:
    """OpenAI's error body for a refusal (code ``overloaded``), with the retry hint in ms."""
    return {
        "message": str(exc),
        "type": "service_unavailable",
        "param": None,
        "code": "overloaded",
        "reason": exc.reason,
        "retry_after_ms": round(exc.retry_after_s * 1000),
    }


def overloaded_message(exc: EngineOverloadedError, rid: str | None) -> Message:
    """The ``error`` message for a request the engine refused or dropped for overload."""
    return {"type": "error", "id": rid, "error": overloaded_body(exc)}


def error_from_wire(error: Message) -> Exception:
    """The exception an engine would have raised, for an ``error`` message's body."""
    message = str(error.get("message"))
    if error.get("code") == "overloaded":
        retry_ms = error.get("retry_after_ms")
        return EngineOverloadedError(
            message,
            retry_ms / 1000 if isinstance(retry_ms, (int, float)) else 1.0,
            str(error.get("reason", "queued_requests")),
        )
    if error.get("code") == "engine_dead":
        return EngineDeadError(message)
    if error.get("type") == "invalid_request_error":
        # A params field the engine named (params.top_p) is named here again.
        param = error.get("param")
        if isinstance(param, str) and param.startswith("params."):
            return ParamError(param.removeprefix("params."), message)
        return ValueError(message)
    return RequestFailedError(message)


# ---- checks -------------------------------------------------------------------------------


def _prompt(value: object) -> PromptType:
    if isinstance(value, str) or matches(value, list[int]):
        return value  # type: ignore[return-value]
    if isinstance(value, dict):
        extra = set(value) - {"prompt", "prompt_token_ids"}
        if extra:
            raise ProtocolError(f"prompt.{sorted(extra)[0]} is not a prompt field", "prompt")
        if "prompt_token_ids" in value and not matches(value["prompt_token_ids"], list[int]):
            raise ProtocolError(
                "prompt.prompt_token_ids must be a list of int", "prompt.prompt_token_ids"
            )
        if "prompt" in value and not matches(value["prompt"], str | None):
            raise ProtocolError("prompt.prompt must be a string or null", "prompt.prompt")
        return value
    raise ProtocolError(
        "prompt must be a string, a list of int, or a map with prompt_token_ids; got "
        + kind_of(value),
        "prompt",
    )
