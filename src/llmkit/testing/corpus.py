"""The conformance corpus: calls, and text around them, that every tool parser must read
the same whole, streamed in any pieces, and cut anywhere."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """Content ``before`` and ``after`` the ``calls`` (in the format under test)."""

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
# The cases cut at every character (max_tokens may end the output anywhere).
CUT_CASES = ("single", "nested", "unicode", "parallel3")


@dataclass(frozen=True)
class Format:
    """How a format writes calls: ``write`` turns calls into the model's text for them;
    ``markup`` holds strings that must never reach content; ``lead`` is what marks calls
    that follow text, if the format needs one (Llama 3's ``<|python_tag|>``);
    ``start_marker``, if calls open with one: no two or more of its first characters may
    end the content of an output that ``max_tokens`` cut inside it."""

    write: Callable[[list[Call]], str]
    markup: tuple[str, ...] = ()
    lead: str = ""
    start_marker: str | None = None


def render(fmt: Format, case: Case) -> str:
    """The model output for ``case`` in ``fmt``."""
    if not case.calls:
        return case.before
    before = case.before + " " + fmt.lead if case.before else ""
    after = " " + case.after if case.after else ""
    return before + fmt.write(case.calls) + after


def expected_content(case: Case) -> str:
    """The content a parser must find in ``case``'s output."""
    return case.before + case.after if case.calls else case.before
