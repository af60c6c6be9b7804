"""The example plugins against llmkit's conformance kit, as any plugin's tests run it:
the parsers loaded through their entry points, as the server loads them."""

from __future__ import annotations

import json

from llmkit.plugin_api import CHAT_TEMPLATES, REASONING_PARSERS, TOOL_PARSERS
from llmkit.plugin_api import load_plugin as load
from llmkit.testing import Call, Format, check_reasoning_parser, check_tool_parser


def write_calls(calls: list[Call]) -> str:
    """Calls as this distribution's format writes them."""
    return "".join(
        f"<function={name}>{json.dumps(args, ensure_ascii=False)}</function>"
        for name, args in calls
    )


FUNCTIONS = Format(write_calls, ("<function=", "</function>"), start_marker="<function=")


def test_tool_parser_passes_the_kit():
    check_tool_parser(load(TOOL_PARSERS, "example_functions"), FUNCTIONS)


def test_reasoning_parser_passes_the_kit():
    check_reasoning_parser(load(REASONING_PARSERS, "example_think"), "[THINK]", "[/THINK]")


def test_template_loads_and_the_tool_parser_is_this_distributions():
    assert "<function=" in load(CHAT_TEMPLATES, "llmkit-example-plugins:example_functions")
    assert load(TOOL_PARSERS, "llmkit-example-plugins:example_functions").__module__ == (
        "llmkit_example_plugins.functions"
    )
