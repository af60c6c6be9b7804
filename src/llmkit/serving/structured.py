"""A request's structured-output constraint: vLLM's ``structured_outputs`` or OpenAI's
``response_format``, as the engine's ``structured_outputs`` and the field to blame."""

from __future__ import annotations

from typing import Any

from llmkit.protocol.openai import ResponseFormat
from llmkit.serving.errors import bad_request

# Engine errors about the constraint name ``structured_outputs``; the client sent this.
FROM_RESPONSE_FORMAT = {"structured_outputs": "response_format"}


def structured_outputs(
    extra: dict[str, Any] | None, response_format: ResponseFormat | None
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The engine's ``structured_outputs`` for a request, and the renames that make its
    errors name the request's field."""
    if response_format is None or response_format.type == "text":
        return extra, {}
    if extra is not None:
        raise bad_request(
            "response_format and structured_outputs cannot both be set", "response_format"
        )
    if response_format.type == "json_object":
        return {"json_object": True}, FROM_RESPONSE_FORMAT
    spec = response_format.json_schema
    if spec is None or spec.json_schema is None:
        raise bad_request(
            "response_format.json_schema.schema is required when type is 'json_schema'",
            "response_format",
        )
    return {"json": spec.json_schema}, FROM_RESPONSE_FORMAT
