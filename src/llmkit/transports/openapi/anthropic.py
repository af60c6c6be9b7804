"""The Messages API's request schemas in the OpenAPI document, fitted to the served model
as openapi_requests fits OpenAI's: what the document calls valid, the server accepts."""

from __future__ import annotations

from typing import Any

from llmkit.transports.openapi.requests import ServedModel

_RULES = (
    "The prompt's tokens plus max_tokens must fit the context (max_model_len); a tool "
    'named by a tool_choice of type "tool" must be in tools, whose input_schema is then a '
    "JSON schema the structured-output backend compiles (as for any); the chat template "
    "must render the messages. A 400 in Anthropic's error shape otherwise."
)


def fit_anthropic_requests(schemas: dict[str, Any], model: ServedModel) -> None:
    """Tighten MessagesRequest and CountTokensRequest in ``schemas`` in place."""
    ref = "#/components/schemas/{}".format
    blocks = [ref("TextBlock"), ref("ToolUseBlock"), ref("ToolResultBlock")]
    if model.supports_images:
        blocks.append(ref("ImageBlock"))
    schemas["AnthropicMessage"]["properties"]["content"] = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"anyOf": [{"$ref": block} for block in blocks]}},
        ]
    }
    modes = ["none", "any", "tool"] + (["auto"] if model.auto_tool_choice else [])
    schemas["ToolChoice"]["properties"]["type"] = {"enum": modes}
    # A tool choice of type "tool" names the tool.
    schemas["ToolChoice"]["anyOf"] = [
        {"properties": {"type": {"enum": [m for m in modes if m != "tool"]}}},
        {"properties": {"name": {"type": "string"}}, "required": ["name"]},
    ]
    messages = schemas["MessagesRequest"]
    messages["description"] = _RULES
    messages["properties"]["max_tokens"]["maximum"] = model.max_model_len - 1
    no_tools = {"properties": {"tools": {"anyOf": [{"type": "null"}, {"maxItems": 0}]}}}
    some_tools = {"properties": {"tools": {"type": "array", "minItems": 1}}, "required": ["tools"]}
    forcing = {"properties": {"type": {"enum": ["any", "tool"]}}, "required": ["type"]}
    rules = messages.setdefault("dependentSchemas", {})
    # any and tool need tools.
    rules["tool_choice"] = {
        "anyOf": [{"properties": {"tool_choice": {"not": forcing}}}, some_tools]
    }
    if not model.auto_tool_choice:
        # Tools need a choice the server can serve: not the default, auto.
        rules["tools"] = {
            "anyOf": [
                no_tools,
                {"properties": {"tool_choice": {"type": "object"}}, "required": ["tool_choice"]},
            ]
        }
