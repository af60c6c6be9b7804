"""The built-in reasoning parsers and the parsers of forced calls: streamed in any
chunking, they give what the whole text gives."""

from __future__ import annotations

import json

import pytest

from llmkit.plugins import REASONING_PARSERS, load
from llmkit.reasoning import ReasoningStream
from llmkit.testing.conformance import chunkings, streamed
from llmkit.tools import extract_tool_calls
from llmkit.tools.forced import CallListParser, NamedCallParser

THINK = {"deepseek_r1": ("<think>", "</think>"), "qwen3": ("<think>", "</think>")}


def split_streamed(parser, pieces: list[str]) -> tuple[str, str]:
    stream = ReasoningStream(parser)
    reasoning = content = ""
    for k, piece in enumerate([*pieces, ""]):
        r, c = stream.feed(piece, final=k == len(pieces))
        reasoning, content = reasoning + r, content + c
    return reasoning, content


@pytest.mark.parametrize("name", list(THINK))
def test_reasoning_split(name):
    start, end = THINK[name]
    parser = load(REASONING_PARSERS, name)()
    thought = "Let me think: 2 + 2 = 4, café."
    texts = {
        f"{start}{thought}{end}\n\nIt is 4.": (thought, "It is 4."),
        f"{start}cut short by max_tokens": ("cut short by max_tokens", ""),
        f"{start}{end}Direct.": ("", "Direct."),
    }  # fmt: skip
    for text, want in texts.items():
        assert parser.split(text, final=True) == want
        for pieces in chunkings(text):
            assert split_streamed(parser, pieces) == want
        for cut in range(len(text)):
            reasoning, content = parser.split(text[:cut], final=True)
            assert start not in reasoning + content and end not in reasoning + content


def test_without_think_tags_qwen3_is_content_and_r1_is_reasoning():
    text = "No tags here."
    assert load(REASONING_PARSERS, "qwen3")().split(text, True) == ("", text)
    assert load(REASONING_PARSERS, "deepseek_r1")().split(text, True) == (text, "")


def test_forced_parsers():
    named = '{"tz": "CET", "n": [1, {"a": "é"}]}'
    listed = json.dumps([{"name": "f", "parameters": {"x": 1}}, {"name": "g", "parameters": {}}])
    for parser, text, want in (
        (NamedCallParser("get_time"), named, [("get_time", named)]),
        (CallListParser(), listed, [("f", '{"x": 1}'), ("g", "{}")]),
    ):
        content, calls = extract_tool_calls(parser, text)
        assert (content, [(c.name, c.arguments) for c in calls]) == ("", want)
        for pieces in chunkings(text):
            assert streamed(parser, pieces) == ("", want)
        # Cut short (max_tokens), a call's arguments are as far as they were written.
        for cut in range(len(text)):
            for call in extract_tool_calls(parser, text[:cut])[1]:
                assert dict(want)[call.name].startswith(call.arguments)
    assert extract_tool_calls(NamedCallParser("f"), named[:9])[1][0].arguments == named[:9]
