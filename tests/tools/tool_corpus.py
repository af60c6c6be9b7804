"""The shared conformance corpus: calls written in each format, with text around them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

Call = tuple[str, dict]


@dataclass(frozen=True)
class Case:
    name: str
    before: str
    calls: list[Call]
    after: str = ""


CALL_SETS: dict[str, list[Call]] = {
    "single": [("get_weather", {"city": "Paris"})],
    "nested": [("book", {"trip": {"from": "OSL", "legs": [{"to": "CDG", "seats": 2}]}})],
    "unicode": [("translate", {"text": "café 日本語 🙂", "to": "ñandú"})],
    "empty": [("ping", {})],
    "escapes": [("echo", {"s": 'say "hi"\\n\tnow', "path": "C:\\dir\\"})],
    "scalars": [("mix", {"n": -12, "x": 3.5, "t": True, "f": False, "z": None})],
    "parallel2": [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})],
    "parallel3": [("a", {"i": 1}), ("b", {}), ("c", {"list": [1, [2, 3], {"k": "v"}]})],
}
CASES = [Case(name, "", calls) for name, calls in CALL_SETS.items()] + [
    Case("text-before", "Let me check that for you.", CALL_SETS["single"]),
    Case("text-after", "", CALL_SETS["single"], "That is all."),
    Case("text-around-parallel", "Two calls:", CALL_SETS["parallel2"], "Done."),
    Case("plain-text", "Just an answer, no tools.", []),
    Case("plain-brackets", "See [1, 2] and a < b > c; {x}.", []),
]


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


def example_functions(calls: list[Call]) -> str:
    return "".join(
        f"<function={n}>{json.dumps(a, ensure_ascii=False)}</function>" for n, a in calls
    )


@dataclass(frozen=True)
class Format:
    write: Callable[[list[Call]], str]
    markup: tuple[str, ...]
    # Some formats mark calls after text with a tag of their own.
    lead: str = ""


FORMATS = {
    "hermes": Format(hermes, ("<tool_call>", "</tool_call>")),
    "mistral": Format(mistral, ("[TOOL_CALLS]",)),
    "llama3_json": Format(llama3_json, ("<|python_tag|>", '"parameters"'), "<|python_tag|>"),
    "pythonic": Format(pythonic, ("get_weather(", "ping(")),
    "example_functions": Format(example_functions, ("<function=", "</function>")),
}


def render(fmt: Format, case: Case) -> str:
    if not case.calls:
        return case.before
    before = case.before + " " + fmt.lead if case.before else ""
    after = " " + case.after if case.after else ""
    return before + fmt.write(case.calls) + after


def expected_content(case: Case) -> str:
    return case.before + case.after if case.calls else case.before
