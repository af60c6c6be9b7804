"""Tool-call parsers: the interface, the streaming driver and the built-in formats.

Parsers are plugins (entry point group ``llmkit.tool_parsers``); llmkit's own are
registered the same way in its ``pyproject.toml``.
"""

from llmkit.tools.base import CallObject, Scan, ScannedCall, ToolParser, read_call_object
from llmkit.tools.marked import MarkedParser, MarkerParser
from llmkit.tools.stream import ToolCall, ToolCallDelta, ToolCallStream, extract_tool_calls

__all__ = [
    "CallObject",
    "MarkedParser",
    "MarkerParser",
    "Scan",
    "ScannedCall",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStream",
    "ToolParser",
    "extract_tool_calls",
    "read_call_object",
]
