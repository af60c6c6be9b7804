"""``qwen3_coder``: Qwen3-Coder's XML calls, ``<tool_call><function=NAME><parameter=KEY>
value</parameter>...</function></tool_call>``, values typed from the tool's schema."""

from __future__ import annotations

from llmkit.tools.base import ScannedCall
from llmkit.tools.json_scan import skip_ws
from llmkit.tools.marked import MarkerParser
from llmkit.tools.typed_args import TypedArgsParser, arguments_text

_FUNCTION = "<function="
_PARAMETER = "<parameter="
_PARAMETER_END = "</parameter>"
_FUNCTION_END = "</function>"


class Qwen3CoderToolParser(TypedArgsParser, MarkerParser):
    start_marker = "<tool_call>"
    end_marker = "</tool_call>"

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        i = skip_ws(text, start + len(self.start_marker))
        name_end = text.find(">", i) if text.startswith(_FUNCTION, i) else -1
        if name_end < 0:
            return [], self._close(text, i) if not _FUNCTION.startswith(text[i:]) else None
        name = text[i + len(_FUNCTION) : name_end].strip()
        pairs: list[tuple[str, object]] = []
        j, closed = name_end + 1, False
        while True:
            j = skip_ws(text, j)
            if text.startswith(_FUNCTION_END, j) or text.startswith(self.end_marker, j):
                closed = True
                break
            key_end = text.find(">", j) if text.startswith(_PARAMETER, j) else -1
            if key_end < 0:
                break
            # The value ends at its close tag, or (a tag the model left out) at what follows.
            ends = [text.find(m, key_end) for m in (_PARAMETER_END, _PARAMETER, _FUNCTION_END)]
            value_end = min((e for e in ends if e >= 0), default=-1)
            if value_end < 0:
                break
            raw = text[key_end + 1 : value_end]
            raw = raw[1:] if raw.startswith("\n") else raw
            raw = raw[:-1] if raw.endswith("\n") else raw
            key = text[j + len(_PARAMETER) : key_end].strip()
            pairs.append((key, self.typed(name, key, raw)))
            j = value_end + (
                len(_PARAMETER_END) if text.startswith(_PARAMETER_END, value_end) else 0
            )
        end = self._close(text, j)
        closed = closed or end is not None
        return [ScannedCall(name, arguments_text(pairs, closed or final))], end

    def _close(self, text: str, i: int) -> int | None:
        close = text.find(self.end_marker, i)
        return None if close < 0 else close + len(self.end_marker)
