"""Every built-in tool parser and reasoning parser against the conformance kit
(``llmkit.testing``), as a plugin's tests run it. Parsers are loaded through the entry
points, as the server does."""

from __future__ import annotations

import pytest
from tool_formats import FORMATS

from llmkit.plugins import REASONING_PARSERS, TOOL_PARSERS, load
from llmkit.testing import CASES, check_reasoning_parser, check_tool_parser, render
from llmkit.tools import ToolCallStream, extract_tool_calls


@pytest.mark.parametrize("name", list(FORMATS))
def test_builtin_tool_parser_passes_the_kit(name):
    check_tool_parser(load(TOOL_PARSERS, name), FORMATS[name])


@pytest.mark.parametrize(
    ("name", "start", "end"),
    [
        ("qwen3", "<think>", "</think>"),
        ("deepseek_r1", "<think>", "</think>"),
        ("openai", "<|channel|>analysis<|message|>", "<|end|>"),
    ],
)
def test_builtin_reasoning_parser_passes_the_kit(name, start, end):
    check_reasoning_parser(load(REASONING_PARSERS, name), start, end)


def test_the_kit_finds_a_parser_that_breaks_the_rules():
    class LeakyParser(load(TOOL_PARSERS, "hermes")):
        """Releases a held-back marker tail: content that streaming cannot take back."""

        def pending(self, text: str, i: int) -> int:
            return len(text)

    with pytest.raises(AssertionError, match="streamed"):
        check_tool_parser(LeakyParser, FORMATS["hermes"])


def test_max_calls_keeps_the_first():
    text = render(FORMATS["mistral"], next(c for c in CASES if c.name == "parallel2"))
    parser = load(TOOL_PARSERS, "mistral")
    _, calls = extract_tool_calls(parser(), text, max_calls=1)
    assert [c.name for c in calls] == ["get_weather"]
    _, deltas = ToolCallStream(parser(), max_calls=1).feed(text, final=True)
    assert [d.name for d in deltas if d.name] == ["get_weather"]


@pytest.mark.parametrize(
    ("parser", "text", "content"),
    [
        ("hermes", "Checking. <tool_c", "Checking."),
        ("mistral", "Sure [TOOL_", "Sure"),
        ("hermes", "a <", "a <"),  # one character is more likely text than a cut marker
    ],
)
def test_a_marker_cut_by_max_tokens_is_held_back(parser, text, content):
    assert extract_tool_calls(load(TOOL_PARSERS, parser)(), text)[0] == content


def test_a_reasoning_end_marker_cut_by_max_tokens_is_held_back():
    parser = load(REASONING_PARSERS, "qwen3")()
    assert parser.split("<think>Checking the map.</thi", final=True) == ("Checking the map.", "")
    assert parser.split("<thin", final=True) == ("", "")
