"""The WebSocket protocol at ``/v1/ws``: OpenAI requests multiplexed on one connection.

Messages are maps with a ``"type"``, as JSON text frames (or msgpack binary frames with
the ``llmkit.msgpack`` subprotocol)::

    client                                                 server
    chat.completions.create {id, body}   ->
    completions.create {id, body}        ->
                                         <-   chunk {id, data}   (data: the SSE chunk object)
                                         <-   done {id, status: finished | cancelled | failed}
    cancel {id}                          ->   (the request ends with done "cancelled")
                                         <-   error {id | null, error: {message, type, param, code}}

``body`` is exactly an HTTP request body; ``stream`` is implied. Ids are the client's,
unique among its requests in flight on the connection. Every request ends with exactly one
``done``; a request that fails gets its ``error`` first. An ``error`` with a null id is
about a message that started no request (bad JSON, an unknown type, a duplicate id, a
cancel for an id not in flight); the connection stays usable after every error. A string
that is not valid Unicode (a ``\ud800`` escape without its pair, invalid UTF-8 in a msgpack
frame) fails its request with code ``invalid_text``, naming the field, never quoting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from llmkit.protocol.messages import (
    Message,
    ProtocolError,
    error_message,
    field_of,
    kind_of,
    request_id_of,
)

# The subprotocols: messages as JSON text frames (also the default) or msgpack binary frames.
JSON_PROTOCOL = "llmkit.json"
MSGPACK_PROTOCOL = "llmkit.msgpack"
# Browsers cannot set Authorization on a WebSocket: the key comes as "llmkit.bearer.<key>".
BEARER_PREFIX = "llmkit.bearer."

CREATE_TYPES = ("chat.completions.create", "completions.create", "responses.create")
DoneStatus = Literal["finished", "cancelled", "failed"]


@dataclass(frozen=True)
class Create:
    """A ``chat.completions.create`` or ``completions.create`` request."""

    kind: Literal["chat.completions.create", "completions.create", "responses.create"]
    id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Cancel:
    id: str


def parse_message(obj: object) -> Create | Cancel:
    """The message ``obj`` holds; raises :class:`ProtocolError` naming what is wrong."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"a message must be a JSON object, got {kind_of(obj)}")
    kind = obj.get("type")
    if kind == "cancel":
        return Cancel(request_id_of(obj))
    if kind in CREATE_TYPES:
        return Create(kind, request_id_of(obj), field_of(obj, "body", dict))
    if not isinstance(kind, str):
        raise ProtocolError(f"type must be a string, got {kind_of(kind)}", "type")
    raise ProtocolError(
        f"unknown message type {kind!r}; expected {', '.join(CREATE_TYPES)} or cancel", "type"
    )


def create_message(
    kind: Literal["chat.completions.create", "completions.create", "responses.create"],
    rid: str,
    body: Message,
) -> Message:
    return {"type": kind, "id": rid, "body": body}


def cancel_message(rid: str) -> Message:
    return {"type": "cancel", "id": rid}


def chunk_message(rid: str, data: Message) -> Message:
    return {"type": "chunk", "id": rid, "data": data}


def done_message(rid: str, status: DoneStatus) -> Message:
    return {"type": "done", "id": rid, "status": status}


def openai_error_message(rid: str | None, error: Message) -> Message:
    """An ``error`` carrying an OpenAI error object (``{message, type, param, code}``)."""
    return {"type": "error", "id": rid, "error": error}


def protocol_error(exc: ProtocolError) -> Message:
    """The ``error`` for a message that started no request: its id is null."""
    return error_message(str(exc), param=exc.param, code=exc.code)
