"""Every tool parser, built-in or plugin, against the shared corpus: whole text, one
character at a time and random chunks all give the same calls, valid JSON arguments and
no markup in content. Parsers are loaded through the entry points, as the server does."""

from __future__ import annotations

import json
import random

import pytest
from tool_corpus import CASES, FORMATS, Format, expected_content, render

from llmkit.plugins import TOOL_PARSERS, load
from llmkit.tools import ToolCallStream, ToolParser, extract_tool_calls


def parser_of(name: str) -> ToolParser:
    return load(TOOL_PARSERS, name)()


def chunkings(text: str) -> list[list[str]]:
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
    content, calls = "", []
    for k, piece in enumerate([*pieces, ""]):
        text, deltas = stream.feed(piece, final=k == len(pieces))
        content += text
        for delta in deltas:
            if delta.index == len(calls):
                assert delta.id and delta.id.startswith("call_") and delta.name
                calls.append([delta.name, delta.arguments])
            else:
                assert delta.index == len(calls) - 1 or delta.index < len(calls)
                assert delta.id is None and delta.name is None and delta.arguments
                calls[delta.index][1] += delta.arguments
    return content, [(name, args) for name, args in calls]


def check(fmt: Format, parser: ToolParser, text: str) -> list[tuple[str, str]]:
    content, calls = extract_tool_calls(parser, text)
    whole = [(c.name, c.arguments) for c in calls]
    for name, arguments in whole:
        json.loads(arguments)
        assert name
    for marker in fmt.markup:
        assert marker not in content
    for pieces in chunkings(text):
        assert streamed(parser, pieces) == (content, whole), pieces
    return whole


@pytest.mark.parametrize("parser_name", list(FORMATS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corpus(parser_name, case):
    fmt = FORMATS[parser_name]
    parser = parser_of(parser_name)
    text = render(fmt, case)
    calls = check(fmt, parser, text)
    assert [(n, json.loads(a)) for n, a in calls] == case.calls
    assert extract_tool_calls(parser, text)[0] == expected_content(case)


@pytest.mark.parametrize("parser_name", list(FORMATS))
@pytest.mark.parametrize("calls", ["single", "nested", "unicode", "parallel3"])
def test_output_cut_anywhere_ends_cleanly(parser_name, calls):
    """max_tokens may cut the output at any character: every cut keeps the rules."""
    fmt = FORMATS[parser_name]
    parser = parser_of(parser_name)
    case = next(c for c in CASES if c.name == calls)
    text = render(fmt, case)
    full = [(n, json.loads(a)) for n, a in check(fmt, parser, text)]
    for cut in range(len(text)):
        content, found = extract_tool_calls(parser, text[:cut])
        for marker in fmt.markup:
            assert marker not in content
        for k, call in enumerate(found[:-1]):
            assert (call.name, json.loads(call.arguments)) == full[k]
        if found:
            assert found[-1].name == full[len(found) - 1][0]
            json.loads(found[-1].arguments)
    for cut in range(0, len(text), 7):
        check(fmt, parser, text[:cut])


def test_several_calls_in_one_delta_are_all_sent():
    stream = ToolCallStream(parser_of("hermes"))
    text = render(FORMATS["hermes"], next(c for c in CASES if c.name == "parallel3"))
    _, deltas = stream.feed(text, final=False)
    assert [d.name for d in deltas if d.name] == ["a", "b", "c"]


def test_max_calls_keeps_the_first():
    text = render(FORMATS["mistral"], next(c for c in CASES if c.name == "parallel2"))
    _, calls = extract_tool_calls(parser_of("mistral"), text, max_calls=1)
    assert [c.name for c in calls] == ["get_weather"]
    assert streamed_names(text, 1) == ["get_weather"]


def streamed_names(text: str, max_calls: int) -> list[str]:
    stream = ToolCallStream(parser_of("mistral"), max_calls=max_calls)
    _, deltas = stream.feed(text, final=True)
    return [d.name for d in deltas if d.name]
