"""``tools`` and ``tool_choice``: what the template sees, the constraint, the parser.

``required`` and a named tool constrain generation with a JSON schema (the structured-
output machinery), so any model, random weights included, writes a valid call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmkit.protocol.openai import ChatCompletionRequest
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import bad_request
from llmkit.tools import ToolParser
from llmkit.tools.forced import CallListParser, NamedCallParser

_ANY_OBJECT: dict[str, Any] = {"type": "object"}
_AUTO_FLAGS = "--enable-auto-tool-choice --tool-call-parser NAME"


@dataclass(frozen=True)
class ToolPlan:
    """How a chat request uses its tools."""

    tools: list[dict[str, Any]] | None
    parser: ToolParser | None = None
    # The structured_outputs that force the calls (required, named), if any.
    constraint: dict[str, Any] | None = None
    max_calls: int | None = None

    @property
    def forced(self) -> bool:
        return self.constraint is not None


def plan_tools(ctx: ServingContext, req: ChatCompletionRequest) -> ToolPlan:
    """Checks ``tools``, ``tool_choice`` and ``parallel_tool_calls``; 400s name the field."""
    tools = req.tools or None
    choice = req.tool_choice
    if tools is None:
        if choice not in (None, "none"):
            raise bad_request("tool_choice needs tools", "tool_choice")
        return ToolPlan(None)
    schemas = {_tool_name(tool, i): _parameters(tool) for i, tool in enumerate(tools)}
    max_calls = None if req.parallel_tool_calls else 1
    if choice is None:
        choice = "auto"
    if choice == "none":
        return ToolPlan(tools)
    if choice == "auto":
        if ctx.tool_parser is None or not ctx.options.enable_auto_tool_choice:
            raise bad_request(
                f'tool_choice "auto" (the default with tools) needs a server started with '
                f'{_AUTO_FLAGS}; or send tool_choice "required", a named tool or "none"',
                "tool_choice",
            )
        parser = ctx.tool_parser()
        parser.use_tools(tools)
        return ToolPlan(tools, parser, max_calls=max_calls)
    if choice == "required":
        call = {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"name": {"enum": [name]}, "parameters": schema},
                    "required": ["name", "parameters"],
                    "additionalProperties": False,
                }
                for name, schema in schemas.items()
            ]
        }
        array: dict[str, Any] = {"type": "array", "items": call, "minItems": 1}
        if max_calls is not None:
            array["maxItems"] = max_calls
        return ToolPlan(tools, CallListParser(), {"json": array}, max_calls)
    name = _named_choice(choice)
    if name not in schemas:
        raise bad_request(
            f"tool_choice names the function {name!r}, which is not in tools", "tool_choice"
        )
    return ToolPlan(tools, NamedCallParser(name), {"json": schemas[name]}, 1)


def check_tools(tools: list[Any]) -> None:
    """Each tool is a function with a name; a 400 naming ``tools`` if one is not."""
    for i, tool in enumerate(tools):
        _tool_name(tool, i)


def _tool_name(tool: Any, i: int) -> str:
    function = tool.get("function") if isinstance(tool, dict) else None
    if (
        not isinstance(tool, dict)
        or tool.get("type", "function") != "function"
        or not isinstance(function, dict)
        or not isinstance(function.get("name"), str)
        or not function["name"]
    ):
        raise bad_request(
            f'tools.{i} must be {{"type": "function", "function": {{"name": ..., '
            '"parameters": {...}}}',
            "tools",
        )
    return str(function["name"])


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool["function"].get("parameters")
    return schema if isinstance(schema, dict) and schema else _ANY_OBJECT


def _named_choice(choice: Any) -> str:
    function = choice.get("function") if isinstance(choice, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise bad_request(
            'tool_choice must be "none", "auto", "required" or '
            '{"type": "function", "function": {"name": ...}}',
            "tool_choice",
        )
    return str(function["name"])
