"""An endpoint declared once: path, method, handler, request and response models, how it
streams and which errors it answers; ``create_app`` builds its route from the declaration,
and ``/openapi.json`` its operation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode
from starlette.requests import Request
from starlette.routing import Route

Handler = Callable[[Request], Awaitable[Any]]
# json: one answer; ndjson: with the request's ``stream`` true (Ollama's default) the
# response model's chunks, one JSON object a line, the last with ``done: true``.
Streaming = Literal["json", "ndjson"]
_MEDIA = {"json": "application/json", "ndjson": "application/x-ndjson"}


@dataclass(frozen=True)
class Endpoint:
    path: str
    method: Literal["GET", "POST", "DELETE"]
    handler: str  # the name of the method of the protocol's routes object that answers it
    summary: str
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    streaming: Streaming = "json"
    errors: tuple[int, ...] = ()
    # The task a single served model needs for the document to list it (None: any).
    task: Literal["generate", "embed"] | None = None


def routes(endpoints: Iterable[Endpoint], handlers: object) -> list[Route]:
    return [Route(e.path, getattr(handlers, e.handler), methods=[e.method]) for e in endpoints]


def schema_models(endpoints: Iterable[Endpoint]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    """The models the endpoints' operations refer to, for the document's schemas."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = []
    for e in endpoints:
        models += [(e.request, "validation")] if e.request else []
        models += [(e.response, "serialization")] if e.response else []
    return list(dict.fromkeys(models))


def operations(
    endpoints: Iterable[Endpoint],
    ref: Callable[[type[BaseModel], JsonSchemaMode], dict[str, Any]],
    errors: dict[int, str],
    error_schema: dict[str, Any],
    unauthorized: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The document's paths for ``endpoints``; ``errors``: what each status means;
    ``unauthorized``: the 401 of a server that takes API keys."""
    paths: dict[str, Any] = {}
    for e in endpoints:
        ok: dict[str, Any] = {"description": "OK"}
        if e.response is not None:
            ok["content"] = {_MEDIA["json"]: {"schema": ref(e.response, "serialization")}}
            if e.streaming == "ndjson":
                ok["description"] = "The answer, or (stream: true, the default) its chunks."
                ok["content"][_MEDIA["ndjson"]] = {"schema": ref(e.response, "serialization")}
        failures = {
            str(status): {
                "description": errors[status],
                "content": {_MEDIA["json"]: {"schema": error_schema}},
            }
            for status in e.errors
        }
        if unauthorized is not None:
            failures["401"] = unauthorized
        responses = failures if e.response is None and e.errors else {"200": ok, **failures}
        operation: dict[str, Any] = {"summary": e.summary, "responses": responses}
        if e.request is not None:
            content = {_MEDIA["json"]: {"schema": ref(e.request, "validation")}}
            operation["requestBody"] = {"required": True, "content": content}
        paths.setdefault(e.path, {})[e.method.lower()] = operation
    return paths
