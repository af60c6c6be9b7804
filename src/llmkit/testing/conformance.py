"""The checks every tool parser and reasoning parser must pass, built-in or plugin:
whole text, one character at a time and random pieces give the same result; no markup
reaches content; a cut anywhere (``max_tokens``) ends cleanly."""

from __future__ import annotations

import json
import random

from llmkit.reasoning.base import ReasoningParser, ReasoningStream, ThinkParser
from llmkit.testing.corpus import CASES, CUT_CASES, Case, Format, expected_content, render
from llmkit.tools.base import ToolParser
from llmkit.tools.stream import ToolCallStream, extract_tool_calls


def chunkings(text: str) -> list[list[str]]:
    """``text`` whole, one character at a time, and in three sets of random pieces."""
    rng = random.Random(len(text))
    out = [[text], list(text)]
    for _ in range(3):
        pieces, i = [], 0
        while i < len(text):
            size = rng.randint(1, 12)
            pieces.append(text[i : i + size])
            i += size
        out.append(pieces)
    return out


def streamed(parser: ToolParser, pieces: list[str]) -> tuple[str, list[tuple[str, str]]]:
    """Content and (name, arguments) per call, from the deltas alone, checking their shape."""
    stream = ToolCallStream(parser)
    content = ""
    calls: list[list[str]] = []
    for k, piece in enumerate([*pieces, ""]):
        text, deltas = stream.feed(piece, final=k == len(pieces))
        content += text
        for delta in deltas:
            if delta.index == len(calls):
                assert delta.id and delta.name, delta
                calls.append([delta.name, delta.arguments])
            else:
                assert delta.index < len(calls), f"a delta for call {delta.index} before its name"
                assert delta.id is None and delta.name is None and delta.arguments, delta
                calls[delta.index][1] += delta.arguments
    return content, [(name, args) for name, args in calls]


def check_text(fmt: Format, parser: ToolParser, text: str) -> list[tuple[str, str]]:
    """The calls of ``text``, after checking that every chunking streams the same."""
    content, calls = extract_tool_calls(parser, text)
    whole = [(c.name, c.arguments) for c in calls]
    for name, arguments in whole:
        json.loads(arguments)
        assert name, f"a call without a name in {text!r}"
    for marker in fmt.markup:
        assert marker not in content, f"markup {marker!r} in the content of {text!r}"
    if fmt.start_marker is not None:
        for size in range(2, len(fmt.start_marker)):
            cut = fmt.start_marker[:size]
            assert not content.endswith(cut), f"a cut marker {cut!r} ends the content {content!r}"
    for pieces in chunkings(text):
        got = streamed(parser, pieces)
        assert got == (content, whole), f"streamed {pieces!r}: {got!r} != {(content, whole)!r}"
    return whole


def _check_case(parser: ToolParser, fmt: Format, case: Case) -> None:
    text = render(fmt, case)
    calls = check_text(fmt, parser, text)
    found = [(n, json.loads(a)) for n, a in calls]
    assert found == case.calls, f"case {case.name}: {text!r} gave {found!r}"
    content = extract_tool_calls(parser, text)[0]
    assert content == expected_content(case), f"case {case.name}: content {content!r}"


def _check_cuts(parser: ToolParser, fmt: Format, case: Case) -> None:
    """max_tokens may cut the output at any character: every cut keeps the rules."""
    text = render(fmt, case)
    full = [(n, json.loads(a)) for n, a in check_text(fmt, parser, text)]
    for cut in range(len(text)):
        content, found = extract_tool_calls(parser, text[:cut])
        where = f"case {case.name} cut at {cut}: {text[:cut]!r}"
        for marker in fmt.markup:
            assert marker not in content, f"{where}: markup {marker!r} in content"
        for k, call in enumerate(found[:-1]):
            assert (call.name, json.loads(call.arguments)) == full[k], f"{where}: call {k}"
        if found:
            assert found[-1].name == full[len(found) - 1][0], f"{where}: the last call's name"
            json.loads(found[-1].arguments)
    for cut in range(0, len(text), 7):
        check_text(fmt, parser, text[:cut])


def check_tool_parser(
    parser_cls: type[ToolParser],
    fmt: Format,
    reasoning: type[ThinkParser] = ThinkParser,
) -> None:
    """Runs the whole corpus on a tool parser (constructed as the server does, without
    arguments) whose format writes calls as ``fmt`` says; raises AssertionError naming
    the case on the first failure.

    Checks: each case whole and streamed in many pieces (same calls, same content, valid
    JSON arguments, no markup in content), cuts at every character, several calls in one
    delta all sent, and calls written inside ``reasoning``'s markers not taken for calls
    (the server splits off reasoning first).
    """
    parser = parser_cls()
    for case in CASES:
        _check_case(parser, fmt, case)
    for case in CASES:
        if case.name in CUT_CASES:
            _check_cuts(parser, fmt, case)
    parallel = next(c for c in CASES if c.name == "parallel3")
    _, deltas = ToolCallStream(parser_cls()).feed(render(fmt, parallel), final=False)
    names = [d.name for d in deltas if d.name]
    assert names == ["a", "b", "c"], f"three calls in one delta sent {names!r}"
    think = reasoning()
    text = f"{think.start}Maybe {fmt.write(parallel.calls)}?{think.end}The answer."
    _, content = think.split(text, final=True)
    found = extract_tool_calls(parser_cls(), content)[1]
    assert not found, f"calls inside the reasoning were taken for calls: {found!r}"


def check_reasoning_parser(parser_cls: type[ReasoningParser], start: str, end: str) -> None:
    """Runs the reasoning corpus on a parser of reasoning between ``start`` and ``end``:
    whole and streamed agree, markers never reach either part, cuts end cleanly."""
    texts = [
        f"{start}Let me think.{end}The answer.",
        f"{start}Short.{end}  Spaced answer.",
        f"{start}Unfinished thought",
        "No reasoning at all.",
        f"{start}{end}Empty reasoning.",
    ]
    for text in texts:
        whole = parser_cls().split(text, final=True)
        for part in whole:
            assert start not in part and end not in part, f"a marker in {whole!r} of {text!r}"
        for pieces in chunkings(text):
            stream = ReasoningStream(parser_cls())
            got = ["", ""]
            for k, piece in enumerate([*pieces, ""]):
                delta = stream.feed(piece, final=k == len(pieces))
                got = [got[0] + delta[0], got[1] + delta[1]]
            assert tuple(got) == whole, f"streamed {pieces!r}: {got!r} != {whole!r}"
        for cut in range(len(text)):
            parts = parser_cls().split(text[:cut], final=True)
            for marker in (start, end):
                for size in range(2, len(marker)):
                    for part in parts:
                        assert not part.endswith(marker[:size]), (
                            f"cut at {cut} of {text!r}: {marker[:size]!r} ends {parts!r}"
                        )
