"""``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one per tag
(Hermes, Qwen2.5, Qwen3 and most ChatML tool templates)."""

from __future__ import annotations

from llmkit.tools.base import ScannedCall, read_call_object
from llmkit.tools.marked import MarkerParser


class HermesToolParser(MarkerParser):
    start_marker = "<tool_call>"
    end_marker = "</tool_call>"

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        body = start + len(self.start_marker)
        found = read_call_object(text, body, final)
        if found.end is None and not found.broken:
            return [found.call], None
        close = text.find(self.end_marker, body if found.end is None else found.end)
        return [found.call], None if close < 0 else close + len(self.end_marker)
