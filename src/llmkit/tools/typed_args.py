"""Argument values written as text (XML-style formats) typed from the tool's JSON schema."""

from __future__ import annotations

import json
from typing import Any

from llmkit.tools.base import ToolParser

_STRINGS = ("string", "str", "text", "varchar", "char", "enum")
_INTEGERS = ("int", "uint", "long", "short", "unsigned")
_BOOLEANS = ("boolean", "bool", "binary")
_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False}


class TypedArgsParser(ToolParser):
    """A parser of formats that write each argument value as text: a value is typed by its
    property's ``type`` in the request's tools (as vLLM's qwen3_coder and glm45 parsers
    type them); a property the schemas do not type is read as JSON where it is JSON (or a
    Python literal the templates write: ``True``), else it stays a string."""

    def __init__(self) -> None:
        self._properties: dict[str, dict[str, Any]] = {}

    def use_tools(self, tools: list[dict[str, Any]]) -> None:
        for tool in tools:
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                continue
            schema = function.get("parameters")
            properties = schema.get("properties") if isinstance(schema, dict) else None
            self._properties[function["name"]] = properties if isinstance(properties, dict) else {}

    def is_text(self, tool: str, key: str) -> bool:
        """Whether argument ``key`` of ``tool`` is a string (its value streams as written)."""
        kind = _type_of(self._properties.get(tool, {}).get(key))
        return kind is not None and kind.startswith(_STRINGS)

    def typed(self, tool: str, key: str, raw: str) -> Any:
        """The value that ``raw``, written for argument ``key`` of ``tool``, stands for."""
        prop = self._properties.get(tool, {}).get(key)
        kind = _type_of(prop)
        if kind is None:
            return _json_or_text(raw)
        if kind.startswith(_STRINGS):
            return raw  # as written, so that streaming it can send it as it comes
        if raw.strip().lower() == "null":
            return None
        try:
            if kind.startswith(_INTEGERS):
                return int(raw.strip())
            if kind.startswith(("num", "float")):
                number = float(raw.strip())
                return int(number) if number.is_integer() and "." not in raw else number
        except ValueError:
            return raw
        if kind in _BOOLEANS:
            return raw.strip().lower() == "true"
        return _json_or_text(raw)


def arguments_text(pairs: list[tuple[str, Any]], closed: bool) -> str:
    """The JSON object text of the pairs read so far; ``closed`` once no more can come."""
    body = ", ".join(
        f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
        for key, value in pairs
    )
    return "{" + body + ("}" if closed else "")


def _type_of(prop: Any) -> str | None:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind.strip().lower() if isinstance(kind, str) else None


def _json_or_text(raw: str) -> Any:
    text = raw.strip()
    if text in _LITERALS:
        return _LITERALS[text]
    try:
        return json.loads(text, parse_constant=_not_json)
    except ValueError:
        return raw


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads would take NaN and Infinity
