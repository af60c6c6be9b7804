"""``mistral``: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (Mistral v0.3)."""

from __future__ import annotations

from llmkit.tools.base import ScannedCall, read_call_list, read_call_object
from llmkit.tools.json_scan import skip_ws
from llmkit.tools.marked import MarkerParser


class MistralToolParser(MarkerParser):
    start_marker = "[TOOL_CALLS]"

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        i = skip_ws(text, start + len(self.start_marker))
        if i >= len(text):
            return [], None
        if text[i] != "[":  # one call without the list around it
            found = read_call_object(text, i, final)
            return [found.call], found.end
        return read_call_list(text, i, final)
