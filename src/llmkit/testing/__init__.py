"""The conformance kit: the checks llmkit's own parsers pass, for a plugin's tests.

``check_tool_parser(MyParser, Format(write_calls, markup, start_marker=...))`` and
``check_reasoning_parser(MyParser, start, end)`` raise AssertionError naming the case.
"""

from llmkit.testing.conformance import check_reasoning_parser, check_text, check_tool_parser
from llmkit.testing.corpus import CASES, Call, Case, Format, expected_content, render

__all__ = [
    "CASES",
    "Call",
    "Case",
    "Format",
    "check_reasoning_parser",
    "check_text",
    "check_tool_parser",
    "expected_content",
    "render",
]
