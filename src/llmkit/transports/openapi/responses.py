"""The Responses API's request schema in the OpenAPI document, fitted to the served model
as openapi_requests fits the others: what the document calls valid, the server accepts."""

from __future__ import annotations

from typing import Any

from llmkit.transports.openapi.requests import ServedModel

_RULES = (
    "The prompt's tokens plus max_output_tokens must fit the context (max_model_len); the "
    "chat template must render the input items; previous_response_id must name a stored "
    "response (a 404 otherwise); a function named by tool_choice must be in tools, whose "
    "parameters are then a JSON schema the structured-output backend compiles (as for "
    "required), and such a choice cannot be combined with text.format; text.format's schema "
    "must compile. A 400 otherwise."
)


def fit_responses_request(schemas: dict[str, Any], model: ServedModel) -> None:
    """Tighten ResponsesRequest in ``schemas`` in place."""
    request = schemas["ResponsesRequest"]
    request["description"] = _RULES
    props = request["properties"]
    props["max_output_tokens"]["anyOf"][0]["maximum"] = model.max_model_len - 1
    modes = ["none", "required"] + (["auto"] if model.auto_tool_choice else [])
    props["tool_choice"]["anyOf"][0] = {"enum": modes}
    rules = request.setdefault("dependentSchemas", {})
    some_tools = {"properties": {"tools": {"type": "array", "minItems": 1}}, "required": ["tools"]}
    # A choice other than none needs tools.
    rules["tool_choice"] = {
        "anyOf": [{"properties": {"tool_choice": {"enum": [None, "none"]}}}, some_tools]
    }
    if not model.auto_tool_choice:
        # Tools need a choice the server can serve: not the default, auto.
        no_tools = {"properties": {"tools": {"anyOf": [{"type": "null"}, {"maxItems": 0}]}}}
        chosen = {"properties": {"tool_choice": {"type": ["string", "object"]}}}
        rules["tools"] = {"anyOf": [no_tools, {**chosen, "required": ["tool_choice"]}]}
    # json_schema carries a schema.
    schemas["TextFormat"]["anyOf"] = [
        {"properties": {"type": {"enum": ["text", "json_object"]}}},
        {"properties": {"schema": {"type": "object"}}, "required": ["schema"]},
    ]
