"""The messages every non-HTTP protocol shares (the unix socket's, the WebSocket's): plain
maps with a ``"type"``, checked field by field, and errors in OpenAI's shape.

A wrong field raises :class:`ProtocolError` naming it; the peer gets an ``error`` message.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union

from llmkit.protocol.text import unencodable_message, unencodable_path

Message = dict[str, Any]

MISSING: Any = object()  # a field that is not there at all


class ProtocolError(ValueError):
    """A message that cannot be served; the peer gets an ``error`` message for it."""

    def __init__(
        self,
        message: str,
        param: str | None = None,
        code: str = "invalid_message",
        request_id: str | None = None,
    ):
        super().__init__(message)
        self.param = param
        self.code = code
        self.request_id = request_id


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


def protocol_error_message(exc: ProtocolError) -> Message:
    return error_message(str(exc), param=exc.param, code=exc.code, request_id=exc.request_id)


MAX_ID_LENGTH = 256


def field_of(obj: Message, name: str, kind: Any, default: Any = MISSING) -> Any:
    """``obj[name]``, checked against the type hint ``kind`` (or ``default`` when absent)."""
    value = obj.get(name, MISSING)
    if value is MISSING and default is not MISSING:
        return default
    if not matches(value, kind):
        raise ProtocolError(f"{name} must be {describe(kind)}, got {kind_of(value)}", name)
    return value


def request_id_of(obj: Message) -> str:
    """A message's ``id``: a client-chosen string of 1 to MAX_ID_LENGTH characters."""
    rid = field_of(obj, "id", str)
    if unencodable_path(rid) is not None:  # it would be echoed in every answer
        raise ProtocolError(unencodable_message("id"), "id", "invalid_text")
    if not 0 < len(rid) <= MAX_ID_LENGTH:
        raise ProtocolError(
            f"id must be 1 to {MAX_ID_LENGTH} characters long, got {len(rid)}", "id"
        )
    return rid


def matches(value: object, hint: Any) -> bool:
    """Whether ``value`` (plain data) has the type ``hint`` names; bools are not numbers."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(matches(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint in (int, float):
        numbers = (int,) if hint is int else (int, float)
        return isinstance(value, numbers) and not isinstance(value, bool)
    if origin is list:
        return isinstance(value, list) and all(matches(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            matches(k, args[0]) and matches(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, hint)


def describe(hint: Any) -> str:
    """A type as an error message says it: "int or null", "a list of int"."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(arg) for arg in args)
    if hint is type(None):
        return "null"
    if hint is dict:
        return "a map"
    if origin is list:
        return f"a list of {describe(args[0])}"
    if origin is dict:
        return f"a map of {describe(args[0])} to {describe(args[1])}"
    return hint.__name__


def kind_of(value: object) -> str:
    return "nothing" if value is MISSING else "null" if value is None else type(value).__name__
