"""How llmkit's built-in tool-call formats write calls, for the conformance kit."""

from __future__ import annotations

import json

from llmkit.testing import Call, Format


def py(value: object) -> str:
    """A Python literal of a JSON value, as a pythonic call writes it."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py(k)}: {py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(py(v) for v in value) + "]"
    return repr(value)


def hermes(calls: list[Call]) -> str:
    return "\n".join(
        f"<tool_call>\n{json.dumps({'name': n, 'arguments': a}, ensure_ascii=False)}\n</tool_call>"
        for n, a in calls
    )


def mistral(calls: list[Call]) -> str:
    return "[TOOL_CALLS]" + json.dumps(
        [{"name": n, "arguments": a} for n, a in calls], ensure_ascii=False
    )


def llama3_json(calls: list[Call]) -> str:
    return "; ".join(json.dumps({"name": n, "parameters": a}) for n, a in calls)


def pythonic(calls: list[Call]) -> str:
    return (
        "["
        + ", ".join(f"{n}({', '.join(f'{k}={py(v)}' for k, v in a.items())})" for n, a in calls)
        + "]"
    )

    return "".join(
        f"<function={n}>{json.dumps(a, ensure_ascii=False)}</function>" for n, a in calls
    )


FORMATS = {
    "hermes": Format(hermes, ("<tool_call>", "</tool_call>"), start_marker="<tool_call>"),
    "mistral": Format(mistral, ("[TOOL_CALLS]",), start_marker="[TOOL_CALLS]"),
    "llama3_json": Format(
        llama3_json, ("<|python_tag|>", '"parameters"'), "<|python_tag|>", "<|python_tag|>"
    ),
    "pythonic": Format(pythonic, ("get_weather(", "ping(")),
}
