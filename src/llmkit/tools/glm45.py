"""``glm45``: GLM-4.5's ``<tool_call>NAME<arg_key>KEY</arg_key><arg_value>value</arg_value>...
</tool_call>`` (newlines between them or not, as GLM-4.5 and 4.7 write them), values typed
from the tool's schema."""

from __future__ import annotations

import re

from llmkit.tools.base import ScannedCall
from llmkit.tools.json_scan import skip_ws
from llmkit.tools.marked import MarkerParser
from llmkit.tools.typed_args import TypedArgsParser, arguments_text

_NAME = re.compile(r"\s*([\w.:-]+)\s*(?=<|$)")
_KEY, _KEY_END = "<arg_key>", "</arg_key>"
_VALUE, _VALUE_END = "<arg_value>", "</arg_value>"


class Glm45ToolParser(TypedArgsParser, MarkerParser):
    start_marker = "<tool_call>"
    special_markup = True
    end_marker = "</tool_call>"

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        i = start + len(self.start_marker)
        name = _NAME.match(text, i)
        if name is None or name.end() == len(text):
            # Not a whole name yet (a name ends at a tag), or no name at all.
            return [], self._close(text, i) if name is None else None
        pairs: list[tuple[str, object]] = []
        j = name.end()
        while text.startswith(_KEY, j):
            key_end = text.find(_KEY_END, j)
            value = skip_ws(text, key_end + len(_KEY_END)) if key_end >= 0 else -1
            value_end = text.find(_VALUE_END, value) if text.startswith(_VALUE, value) else -1
            if value_end < 0:
                break
            key = text[j + len(_KEY) : key_end].strip()
            raw = text[value + len(_VALUE) : value_end]
            pairs.append((key, self.typed(name.group(1), key, raw)))
            j = skip_ws(text, value_end + len(_VALUE_END))
        end = self._close(text, j)
        arguments = arguments_text(pairs, end is not None or final)
        return [ScannedCall(name.group(1), arguments)], end

    def _close(self, text: str, i: int) -> int | None:
        close = text.find(self.end_marker, i)
        return None if close < 0 else close + len(self.end_marker)
