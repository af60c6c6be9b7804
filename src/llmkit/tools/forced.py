"""Reading the JSON that ``tool_choice="required"`` or a named tool forces the model to
write (see ``serving/tool_choice.py``): no markup, the calls are the whole output."""

from __future__ import annotations

from llmkit.tools.base import Scan, ScannedCall, ToolParser, read_call_list
from llmkit.tools.json_scan import Malformed, Truncated, safe_prefix, skip_ws, value_end


class NamedCallParser(ToolParser):
    """The output is the arguments object of a call to ``name``."""

    def __init__(self, name: str):
        self.name = name

    def scan(self, text: str, final: bool) -> Scan:
        start = skip_ws(text, 0)
        try:
            return Scan("", [ScannedCall(self.name, text[start : value_end(text, start)])])
        except (Truncated, Malformed):
            pass
        n, closers = safe_prefix(text[start:])
        arguments = text[start : start + n]
        if final:
            arguments = (arguments + closers) or "{}"
        return Scan("", [ScannedCall(self.name, arguments)])


class CallListParser(ToolParser):
    """The output is ``[{"name": ..., "parameters": {...}}, ...]``."""

    def scan(self, text: str, final: bool) -> Scan:
        start = skip_ws(text, 0)
        if text[start : start + 1] != "[":
            return Scan("", [])
        calls, _ = read_call_list(text, start, final, ("parameters", "arguments"))
        return Scan("", [call for call in calls if call is not None])
