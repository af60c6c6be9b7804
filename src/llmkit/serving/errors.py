"""OpenAIError: one exception carrying an HTTP-style status and OpenAI's error body."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from llmkit.errors import EngineDeadError, EngineOverloadedError, ParamError, RequestFailedError
from llmkit.protocol.openai import ErrorInfo, ErrorResponse

_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "requests",
    500: "server_error",
    503: "service_unavailable",
}


class OpenAIError(Exception):
    """An error to report to the client as ``{"error": {message, type, param, code}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        *,
        retry_after_s: float | None = None,
        error_type: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.retry_after_s = retry_after_s
        self.error_type = error_type

    @property
    def headers(self) -> dict[str, str]:
        """``Retry-After`` (whole seconds) and ``retry-after-ms`` when there is a retry hint."""
        if self.retry_after_s is None:
            return {}
        return {
            "retry-after": str(max(1, math.ceil(self.retry_after_s))),
            "retry-after-ms": str(max(1, round(self.retry_after_s * 1000))),
        }

    def body(self) -> ErrorResponse:
        kind = self.error_type or _TYPES.get(
            self.status, "invalid_request_error" if self.status < 500 else "server_error"
        )
        return ErrorResponse(
            error=ErrorInfo(message=self.message, type=kind, param=self.param, code=self.code)
        )


def bad_request(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    return OpenAIError(400, message, param, code)


def from_value_error(exc: ValueError, default: str | None = None) -> OpenAIError:
    """A 400 for the engine's ValueError, naming the parameter a ``ParamError`` names (else
    ``default``)."""
    if isinstance(exc, ParamError):
        return bad_request(str(exc), exc.param)
    return bad_request(str(exc), default)


@contextlib.contextmanager
def naming(names: dict[str, str]) -> Iterator[None]:
    """400s raised inside name the request's fields where the engine has its own names for
    them (``names``: the engine's -> the request's, e.g. ``logprobs`` -> ``top_logprobs``)."""
    try:
        yield
    except OpenAIError as exc:
        if exc.status != 400 or exc.param not in names:
            raise
        renamed = ParamError(exc.param, exc.message).renamed(names)
        raise bad_request(str(renamed), renamed.param, exc.code) from None


def from_validation_error(exc: ValidationError) -> OpenAIError:
    """A 400 for a request body that does not match its model, naming the first bad field."""
    errors = exc.errors()
    first = errors[0]
    path = _path(first["loc"])
    if len(path) < len(first["loc"]):
        # A field taking several shapes: why the value fails the one shape it has, if it
        # has one; else which shapes it may take, rather than why each one failed.
        members = _members(errors, path)
        fitting = {
            _said(errs[0]): errs[0] for errs in members.values() if not all(map(_mismatch, errs))
        }
        if len(fitting) != 1:
            shapes = " or ".join(_shape(tag) for tag in members)
            return bad_request(f"{'.'.join(path)} must be {shapes}", path[0])
        (first,) = fitting.values()
    where = ".".join(str(part) for part in first["loc"] if not _is_tag(part)) or "body"
    if first["type"] == "missing":
        message = f"{where} is required"
    elif first["type"] == "json_invalid":
        message = _invalid_json(first["msg"])
    elif first["type"] in _EXPECTED:
        message = (
            f"Invalid type for '{where}': expected {_EXPECTED[first['type']]}, but got "
            f"{_json_type(first['input'])} instead."
        )
    elif first["type"] in _TOO_SHORT and first.get("ctx", {}).get("min_length") == 1:
        message = f"{where} must not be empty"
    else:
        message = f"{where}: {first['msg']}"
    return bad_request(message, path[0] if path else None)


def _members(errors: list[Any], path: list[str]) -> dict[str, list[Any]]:
    """The errors of each shape of the union at ``path``, by the shape's tag."""
    members: dict[str, list[Any]] = {}
    for error in errors:
        loc = error["loc"]
        if _path(loc) == path and len(loc) > len(path):
            members.setdefault(str(loc[len(path)]), []).append(error)
    return members


def _mismatch(error: Any) -> bool:
    """Whether ``error`` says the value is not of a shape's type (it has another shape)."""
    return error["type"] in _EXPECTED or error["type"] == "literal_error"


def _said(error: Any) -> tuple[Any, ...]:
    """What an error says, and where, whichever shape of a union it was found in."""
    where = tuple(part for part in error["loc"] if not _is_tag(part))
    return where, error["type"], error["msg"]


# What a strict type error expected, in JSON's words.
_EXPECTED = {
    "bool_type": "a boolean",
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _invalid_json(detail: str) -> str:
    # jiter's words for a \ud800-\udfff escape without its pair, which Python's json module
    # would let through; say what is wrong rather than where the escape ended.
    if "surrogate" in detail or "end of hex escape" in detail:
        return (
            "the request body is not valid JSON: it holds a lone UTF-16 surrogate "
            "(a \\ud800-\\udfff escape without its pair), which is not valid Unicode"
        )
    return f"the request body is not valid JSON: {detail.removeprefix('Invalid JSON: ')}"


def _path(loc: tuple) -> list[str]:
    """The location up to the first union member tag (``str``, ``list[int]``, a model name)."""
    path = []
    for part in loc:
        if _is_tag(part):
            break
        path.append(str(part))
    return path


def _is_tag(part: object) -> bool:
    """Whether a part of an error's location is a union member's tag, not a field or index."""
    return isinstance(part, str) and (
        part in _TAGS or "[" in part or part[:1].isupper() or part.startswith("constrained-")
    )


_TAGS = {"str", "int", "float", "bool", "dict", "list", "none"}
_TOO_SHORT = ("too_short", "string_too_short")
# pydantic's tag of a type with a validator: function-before[integral(), int] is an int.
_VALIDATED = re.compile(r"function-(?:before|after|wrap|plain)\[[^\]]*?, ([^\]]+)\]")


def _shape(tag: str) -> str:
    return _VALIDATED.sub(r"\1", tag).replace("constrained-", "")


def from_engine_error(exc: BaseException) -> OpenAIError:
    """A 5xx for a failure inside the engine, which is never the client's fault; a 503 with
    a retry hint when the engine is overloaded."""
    if isinstance(exc, EngineOverloadedError):
        return overloaded(str(exc), exc.retry_after_s)
    if isinstance(exc, EngineDeadError):
        return OpenAIError(503, f"the engine is not running: {exc}")
    if isinstance(exc, RequestFailedError):
        return OpenAIError(500, f"the engine failed on this request: {exc}")
    return OpenAIError(500, f"internal error: {type(exc).__name__}: {exc}")


def overloaded(message: str, retry_after_s: float) -> OpenAIError:
    """The 503 (code ``overloaded``) for work refused for lack of room, with a retry hint."""
    return OpenAIError(503, message, None, "overloaded", retry_after_s=retry_after_s)
