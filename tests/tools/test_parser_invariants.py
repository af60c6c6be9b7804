"""The contracts clients break on, checked once over every tool parser in the registry
(built in or from a plugin distribution), through the server's extraction: streamed calls
carry indexes 0, 1, 2... in order; a call's first delta has its id, type and name; the
argument fragments join into the whole answer's arguments; a stop after a call finishes
as ``tool_calls``; and a call written inside the reasoning is still a call."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tool_formats import FORMATS

from llmkit.plugins import REASONING_PARSERS, TOOL_PARSERS, installed, load
from llmkit.serving.extraction import Extractor
from llmkit.testing import Call, Format
from llmkit.tools import Scan, ToolParser

_WORDS = st.text(alphabet="abcxyz ÉΩ", min_size=1, max_size=8).filter(
    lambda s: s.strip() not in ("true", "false", "null", "")
)
_VALUES = st.one_of(
    _WORDS, st.integers(-99, 99), st.booleans(), st.lists(st.integers(0, 9), max_size=3)
)
_CALLS = st.lists(
    st.tuples(
        st.sampled_from(["get_weather", "get_time", "ping"]),
        st.dictionaries(st.sampled_from(["city", "days", "tags"]), _VALUES, max_size=3),
    ),
    min_size=0,
    max_size=3,
)


def write(name: str, fmt: Format, calls: list[Call], thinking: bool) -> str:
    """The model output: reasoning, then text and the calls (inside the reasoning if
    ``thinking``), then an answer."""
    markup = fmt.write(calls) if calls else ""
    if name == "openai":  # Harmony: reasoning is the analysis channel, calls are messages
        if thinking:
            markup = markup.replace("commentary", "analysis")
        thought = "<|channel|>analysis<|message|>Let me see.<|end|>"
        return thought + markup + "<|start|>assistant<|channel|>final<|message|>Done."
    lead = f" {fmt.lead}" if fmt.lead else " "
    if thinking:
        return f"<think>Let me see.{lead}{markup}</think>Done."
    return f"<think>Let me see.</think>Checking.{lead}{markup}"


def extractor(name: str) -> Extractor:
    reasoning = load(REASONING_PARSERS, "openai" if name == "openai" else "qwen3")()
    return Extractor(reasoning, load(TOOL_PARSERS, name)())


def check_invariants(
    make: Callable[[], Extractor], text: str, sizes: list[int]
) -> list[tuple[str, Any]]:
    """Streams ``text`` in pieces of ``sizes`` through ``make()`` and checks the contracts
    against the whole answer; returns the whole answer's calls."""
    whole = make().whole(text)
    expected = [(c.function.name, c.function.arguments) for c in whole.tool_calls or []]
    stream = make()
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    i, k = 0, 0
    while True:
        piece = text[i : i + sizes[k % len(sizes)]]
        i, k = i + len(piece), k + 1
        delta = stream.feed(piece, final=i >= len(text))
        for call in (delta.tool_calls if delta else None) or []:
            if call.index not in names:
                assert call.index == len(names), f"index {call.index} after {len(names)} calls"
                assert call.id and call.type == "function" and call.function.name, call
                names[call.index] = call.function.name
            else:
                assert call.id is None and call.function.name is None, call
            arguments[call.index] = arguments.get(call.index, "") + call.function.arguments
        if i >= len(text):
            break
    streamed = [(names[j], arguments[j]) for j in range(len(names))]
    assert streamed == expected, f"{text!r}: streamed {streamed} != whole {expected}"
    assert stream.finish_reason("stop") == ("tool_calls" if expected else "stop")
    assert stream.finish_reason("length") == "length"
    return [(n, json.loads(a)) for n, a in expected]


PARSERS = sorted(installed(TOOL_PARSERS))


def test_every_parser_in_the_registry_has_a_format_here():
    assert set(PARSERS) <= set(FORMATS), "a parser without a format to write its calls"


@pytest.mark.parametrize("name", PARSERS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=_CALLS, thinking=st.booleans(), sizes=st.lists(st.integers(1, 9), min_size=1))
def test_streamed_calls_keep_the_contracts(name, calls, thinking, sizes):
    parser = load(TOOL_PARSERS, name)
    text = write(name, FORMATS[name], calls, thinking)
    found = check_invariants(lambda: extractor(name), text, sizes)
    if thinking and not parser.calls_in_reasoning:
        assert found == []
    else:
        assert found == [(n, a) for n, a in calls], text


class SwappingParser(ToolParser):
    """Breaks the contracts: it reads a text's calls back to front."""

    def scan(self, text: str, final: bool) -> Scan:
        found = load(TOOL_PARSERS, "hermes")().scan(text, final)
        return Scan(found.content, list(reversed(found.calls)))


def test_the_property_fails_a_parser_that_breaks_a_contract():
    text = write("hermes", FORMATS["hermes"], [("get_time", {"tz": "a"}), ("ping", {})], False)
    with pytest.raises(AssertionError, match="streamed"):
        check_invariants(
            lambda: Extractor(load(REASONING_PARSERS, "qwen3")(), SwappingParser()), text, [3]
        )
