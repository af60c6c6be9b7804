"""Reading the JSON that ``tool_choice="required"`` or a named tool forces the model to
write (see ``serving/tool_choice.py``): no markup, the calls are the whole output.

The grammar lets the model end only after whole JSON, so a final text that ends inside
the arguments was cut (max_tokens): as OpenAI does, the arguments stay as written, and
the choice's finish_reason says "length".
"""

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
        n = len(text) - start if final else safe_prefix(text[start:])[0]
        return Scan("", [ScannedCall(self.name, text[start : start + n])])


class CallListParser(ToolParser):
    """The output is ``[{"name": ..., "parameters": {...}}, ...]``."""

    def scan(self, text: str, final: bool) -> Scan:
        start = skip_ws(text, 0)
        if text[start : start + 1] != "[":
            return Scan("", [])
        calls, _ = read_call_list(text, start, final, ("parameters", "arguments"), keep_cut=True)
        return Scan("", [call for call in calls if call is not None])
