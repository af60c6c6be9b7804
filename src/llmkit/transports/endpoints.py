"""An endpoint declared once: path, method, handler, request and response models, how it
streams and which errors it answers; an API, the endpoints whose errors share one shape.
``create_app`` builds each route from its declaration, and ``/openapi.json`` its operation."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode
from starlette.routing import Route

from llmkit.protocol.openai import ErrorResponse
from llmkit.serving.errors import OpenAIError

Ref = Callable[[type[BaseModel], JsonSchemaMode], dict[str, Any]]
# json: one answer; sse: with the request's ``stream`` true, Server-Sent Events (each one's
# data a chunk as JSON); ndjson: with ``stream`` true (Ollama's default) the response model's
# chunks, one JSON object a line, the last with ``done: true``.
Streaming = Literal["json", "sse", "ndjson"]
# A 200's body: a model, plain text, JSON of any shape, or nothing.
Body = type[BaseModel] | Literal["text", "json"] | None
# An error as an API's own clients read it.
ErrorShape = Callable[[OpenAIError], BaseModel]
_MEDIA = {"json": "application/json", "ndjson": "application/x-ndjson"}
_OK = {
    "sse": "The result, or with stream: true its events.",
    "ndjson": "The answer, or (stream: true, the default) its chunks.",
}
# What the server answers before any endpoint does (API keys, body limits, rate limits), in
# OpenAI's error shape whichever the API, but a 401 in the shape of an API with its own
# (``Api.error``); a body limit met while the endpoint reads its body is that endpoint's
# error, in its API's shape.
_BODY_ERRORS = (408, 413)
SERVER_ERRORS = {
    401: "The API key is missing or wrong.",
    408: "The request body did not arrive in time.",
    413: "The request body is larger than the server takes.",
    429: "A per-key rate limit was reached; retry after Retry-After.",
}


@dataclass(frozen=True)
class Endpoint:
    path: str  # Starlette's, converters included (``/v1/models/{model:path}``)
    method: Literal["GET", "POST", "DELETE"]
    handler: str  # the name of the method of the API's routes object that answers it
    summary: str
    request: type[BaseModel] | None = None
    response: Body = None
    streaming: Streaming = "json"
    errors: tuple[int, ...] = ()  # the statuses it answers itself, in its API's error shape
    # The task a single served model needs for the document to list it (None: any).
    task: Literal["generate", "embed"] | None = None
    chunk: type[BaseModel] | None = None  # sse: the model of each event's data
    events: str = ""  # sse: what each event's data is, where more than a chunk
    ok: str = ""  # what a 200 means, where not its streaming kind's default
    notes: tuple[tuple[int, str], ...] = ()  # what a status means here, where not the API's
    refuses: bool = False  # answers its errors only (no 200)
    public: bool = False  # needs no API key and is never rate limited (probes, the document)
    # What else it needs of the model: "insert", the FIM tokens code completion takes.
    capability: Literal["insert"] | None = None
    batch: bool = False  # a line of `llmkit run-batch` may name it (vLLM's set, and Responses)

    @property
    def documented_path(self) -> str:
        return re.sub(r"\{(\w+):\w+\}", r"{\1}", self.path)


@dataclass(frozen=True)
class Api:
    """A wire API: its endpoints, what each status of its own errors means, the model of an
    error's body (None: an error has none), and, for an API whose clients read their own
    error shape, how an error reads in it (None: OpenAI's): the 401 for a missing key, which
    the server answers before any endpoint, follows it too."""

    name: str
    endpoints: tuple[Endpoint, ...]
    errors: Mapping[int, str]
    error_model: type[BaseModel] | None
    error: ErrorShape | None = None


def routes(api: Api, handlers: object) -> list[Route]:
    """One route per path and handler, with its methods (a 405 then allows them all)."""
    methods: dict[tuple[str, str], list[str]] = {}
    for e in api.endpoints:
        methods.setdefault((e.path, e.handler), []).append(e.method)
    return [Route(p, getattr(handlers, h), methods=m) for (p, h), m in methods.items()]


def schema_models(apis: Iterable[Api]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    """The models the APIs' operations refer to, for the document's schemas."""
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = []
    for api in apis:
        for e in api.endpoints:
            models += [(e.request, "validation")] if e.request else []
            for body in (e.response, e.chunk):
                models += [(body, "serialization")] if isinstance(body, type) else []
        models += [(api.error_model, "serialization")] if api.error_model else []
    return list(dict.fromkeys(models))


def operations(
    api: Api, endpoints: Iterable[Endpoint], ref: Ref, open_paths: frozenset[str] | None
) -> dict[str, Any]:
    """The document's paths for ``endpoints`` of ``api``; ``open_paths``: the paths that
    need no API key (None: the server takes no keys)."""
    paths: dict[str, Any] = {}
    for e in endpoints:
        failures = {status: _own_error(api, e, status, ref) for status in e.errors}
        # The server's own: rate limits (not on probes), body limits, keys where asked.
        server: tuple[int, ...] = () if e.public else (429, *_BODY_ERRORS) if e.request else (429,)
        if open_paths is not None and e.path not in open_paths:
            server += (401,)
        failures |= {status: _server_error(api, status, ref) for status in server}
        responses = {str(s): failures[s] for s in sorted(failures)}
        operation: dict[str, Any] = {
            "summary": e.summary,
            "responses": responses if e.refuses else {"200": _ok(e, ref), **responses},
        }
        names = re.findall(r"\{(\w+)", e.path)
        if names:
            string = {"type": "string"}
            operation["parameters"] = [
                {"name": n, "in": "path", "required": True, "schema": string} for n in names
            ]
        if e.request is not None:
            body = {_MEDIA["json"]: {"schema": ref(e.request, "validation")}}
            operation["requestBody"] = {"required": True, "content": body}
        paths.setdefault(e.documented_path, {})[e.method.lower()] = operation
    return paths


def _server_error(api: Api, status: int, ref: Ref) -> dict[str, Any]:
    schema = ref(ErrorResponse, "serialization")
    if status == 401 and api.error is not None and api.error_model is not None:
        schema = ref(api.error_model, "serialization")
    elif status in _BODY_ERRORS and api.error_model not in (None, ErrorResponse):
        schema = {"anyOf": [schema, ref(api.error_model, "serialization")]}
    return {"description": SERVER_ERRORS[status], "content": {_MEDIA["json"]: {"schema": schema}}}


def _own_error(api: Api, e: Endpoint, status: int, ref: Ref) -> dict[str, Any]:
    failure: dict[str, Any] = {"description": dict(e.notes).get(status) or api.errors[status]}
    if api.error_model is not None:
        failure["content"] = {_MEDIA["json"]: {"schema": ref(api.error_model, "serialization")}}
    return failure


def _ok(e: Endpoint, ref: Ref) -> dict[str, Any]:
    default = _OK.get(e.streaming) or ("The result." if e.request else "OK")
    ok: dict[str, Any] = {"description": e.ok or default}
    if e.response == "text":
        ok["content"] = {"text/plain": {"schema": {"type": "string"}}}
    elif e.response == "json":
        ok["content"] = {_MEDIA["json"]: {"schema": {}}}
    elif e.response is not None:
        schema = ref(e.response, "serialization")
        ok["content"] = {_MEDIA["json"]: {"schema": schema}}
        if e.streaming == "ndjson":
            ok["content"][_MEDIA["ndjson"]] = {"schema": schema}
        elif e.streaming == "sse":
            chunk = e.chunk.__name__ if e.chunk else "chunk"
            about = e.events or f"A {chunk} as JSON, or [DONE] at the end."
            data = {"data": {"type": "string", "description": about}}
            event = {"type": "object", "properties": data, "required": ["data"]}
            ok["content"]["text/event-stream"] = {"schema": event}
    return ok
