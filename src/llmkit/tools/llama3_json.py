"""``llama3_json``: Llama 3.x JSON calls, ``{"name": ..., "parameters": {...}}``, at the
start of the output or after ``<|python_tag|>``, several separated by ``;``."""

from __future__ import annotations

from llmkit.tools.base import ScannedCall, read_call_object
from llmkit.tools.json_scan import skip_ws
from llmkit.tools.marked import MarkedParser, cut_marker, partial_marker

PYTHON_TAG = "<|python_tag|>"


class Llama3JsonToolParser(MarkedParser):
    def find_region(self, text: str, i: int) -> int | None:
        first = skip_ws(text, 0)
        if i == 0 and text[first : first + 1] == "{":
            return first
        found = text.find(PYTHON_TAG, i)
        return None if found < 0 else found

    def pending(self, text: str, i: int) -> int:
        return partial_marker(text, i, PYTHON_TAG)

    def cut(self, text: str, i: int) -> int:
        return cut_marker(text, i, PYTHON_TAG)

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        i = start + len(PYTHON_TAG) if text.startswith(PYTHON_TAG, start) else start
        calls: list[ScannedCall | None] = []
        while True:
            found = read_call_object(text, skip_ws(text, i), final, ("parameters", "arguments"))
            calls.append(found.call)
            if found.end is None:
                return calls, None
            after = skip_ws(text, found.end)
            if after >= len(text):
                return calls, len(text) if final else None
            if text[after] != ";":
                return calls, found.end
            i = after + 1
