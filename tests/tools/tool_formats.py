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


def deepseek_v31(calls: list[Call]) -> str:
    return (
        "<｜tool▁calls▁begin｜>"
        + "".join(
            f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{json.dumps(a, ensure_ascii=False)}"
            "<｜tool▁call▁end｜>"
            for n, a in calls
        )
        + "<｜tool▁calls▁end｜>"
    )


def kimi_k2(calls: list[Call]) -> str:
    return (
        "<|tool_calls_section_begin|>"
        + "".join(
            f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>"
            f"{json.dumps(a, ensure_ascii=False)}<|tool_call_end|>"
            for i, (n, a) in enumerate(calls)
        )
        + "<|tool_calls_section_end|>"
    )


def _text(value: object) -> str:
    """An argument value as the XML-style templates write it: strings as they are."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def qwen3_coder(calls: list[Call]) -> str:
    return "".join(
        f"<tool_call>\n<function={n}>\n"
        + "".join(f"<parameter={k}>\n{_text(v)}\n</parameter>\n" for k, v in a.items())
        + "</function>\n</tool_call>"
        for n, a in calls
    )


def glm45(calls: list[Call]) -> str:
    return "\n".join(
        f"<tool_call>{n}\n"
        + "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{_text(v)}</arg_value>\n" for k, v in a.items()
        )
        + "</tool_call>"
        for n, a in calls
    )


def harmony(calls: list[Call]) -> str:
    return "".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>"
        f"{json.dumps(a, ensure_ascii=False)}<|call|>"
        for n, a in calls
    )


def example_functions(calls: list[Call]) -> str:
    """The example plugin distribution's format (its own tests write it the same way)."""
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
    "qwen3_coder": Format(
        qwen3_coder,
        ("<tool_call>", "<function=", "<parameter=", "</tool_call>"),
        start_marker="<tool_call>",
    ),
    "glm45": Format(
        glm45,
        ("<tool_call>", "<arg_key>", "<arg_value>", "</tool_call>"),
        start_marker="<tool_call>",
    ),
    "openai": Format(
        harmony,
        ("<|start|>", "<|channel|>", "<|message|>", "<|call|>", "commentary"),
        start_marker="<|start|>",
    ),
    "deepseek_v31": Format(
        deepseek_v31,
        ("<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁calls▁end｜>"),
        start_marker="<｜tool▁calls▁begin｜>",
    ),
    "example_functions": Format(
        example_functions, ("<function=", "</function>"), start_marker="<function="
    ),
    "kimi_k2": Format(
        kimi_k2,
        ("<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_calls_section_end|>"),
        start_marker="<|tool_calls_section_begin|>",
    ),
}
