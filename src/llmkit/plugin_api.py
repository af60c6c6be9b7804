"""The plugin API: everything a tool-parser, reasoning-parser or chat-template plugin may
import, and nothing else. It changes incompatibly only with ``PLUGIN_API_VERSION``.

A plugin states the version it was written for as ``requires_llmkit_plugin_api = 1``
(in its module or on its class); llmkit refuses a plugin written for another version,
at load, with a message naming it. ``llmkit.testing`` checks a parser against the corpus
llmkit's own parsers pass. See the documentation's "Writing a plugin" (docs/plugins.md).
"""

from llmkit.chat.resolve import resolve_chat_template
from llmkit.plugins import CHAT_TEMPLATES, REASONING_PARSERS, TOOL_PARSERS
from llmkit.plugins import load as load_plugin
from llmkit.plugins.checks import PLUGIN_API_VERSION
from llmkit.reasoning.base import ReasoningParser, ReasoningStream, ThinkParser
from llmkit.tools.base import CallObject, Scan, ScannedCall, ToolParser, read_call_object
from llmkit.tools.json_scan import (
    Malformed,
    Truncated,
    close_json,
    expect,
    safe_prefix,
    skip_ws,
    string_end,
    value_end,
)
from llmkit.tools.marked import MarkedParser, MarkerParser, cut_marker, partial_marker
from llmkit.tools.stream import ToolCall, ToolCallDelta, ToolCallStream, extract_tool_calls

__all__ = [
    "CHAT_TEMPLATES",
    "PLUGIN_API_VERSION",
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "CallObject",
    "Malformed",
    "MarkedParser",
    "MarkerParser",
    "ReasoningParser",
    "ReasoningStream",
    "Scan",
    "ScannedCall",
    "ThinkParser",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStream",
    "ToolParser",
    "Truncated",
    "close_json",
    "cut_marker",
    "expect",
    "extract_tool_calls",
    "load_plugin",
    "partial_marker",
    "read_call_object",
    "resolve_chat_template",
    "safe_prefix",
    "skip_ws",
    "string_end",
    "value_end",
]
