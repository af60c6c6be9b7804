"""Parsing a JSON body into its request model, answering JSON, and Starlette's exception
handlers, which answer every error in OpenAI's shape."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from llmkit.serving.errors import OpenAIError, bad_request, from_validation_error
from llmkit.transports.http.middleware import CLIENT_CLOSED

M = TypeVar("M", bound=BaseModel)


async def parse_body(request: Request, model: type[M]) -> M:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise bad_request(
            f"the request body must be JSON with Content-Type: application/json, got "
            f"{content_type or 'no Content-Type'}"
        )
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def json_answer(result: BaseModel | None, status: int = 200) -> Response:
    if result is None:  # the client left: the server drops this, as nobody is there
        return Response(status_code=CLIENT_CLOSED)
    return Response(result.model_dump_json(), status_code=status, media_type="application/json")


async def _openai_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OpenAIError)
    response = json_answer(exc.body(), exc.status)
    response.headers.update(exc.headers)
    return response


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    response = json_answer(OpenAIError(exc.status_code, str(exc.detail)).body(), exc.status_code)
    response.headers.update(exc.headers or {})  # a 405's Allow
    return response


async def _internal_error(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after this answer, so the server logs the traceback.
    return json_answer(OpenAIError(500, f"internal error: {type(exc).__name__}").body(), 500)


# Starlette's exception handlers: every error leaves in OpenAI's shape.
ERROR_HANDLERS: dict[Any, Any] = {
    OpenAIError: _openai_error,
    HTTPException: _http_error,
    Exception: _internal_error,
}
