"""``qwen3_coder``: Qwen3-Coder's XML calls, ``<tool_call><function=NAME><parameter=KEY>
value</parameter>...</function></tool_call>``, values typed from the tool's schema."""

from __future__ import annotations

import json

from llmkit.tools.base import ScannedCall
from llmkit.tools.json_scan import skip_ws
from llmkit.tools.marked import MarkerParser, partial_marker
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
        # A string value being written: it streams as it comes (a file's contents).
        partial: tuple[str, str] | None = None
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
            key = text[j + len(_PARAMETER) : key_end].strip()
            if value_end < 0:
                if self.is_text(name, key):
                    partial = key, _trimmed(_settled(text[key_end + 1 :]))
                break
            pairs.append((key, self.typed(name, key, _trimmed(text[key_end + 1 : value_end]))))
            j = value_end + (
                len(_PARAMETER_END) if text.startswith(_PARAMETER_END, value_end) else 0
            )
        end = self._close(text, j)
        closed = closed or end is not None
        if partial is None or closed:
            return [ScannedCall(name, arguments_text(pairs, closed or final))], end
        key, value = (json.dumps(part, ensure_ascii=False) for part in partial)
        arguments = arguments_text(pairs, False) + (", " if pairs else "") + f"{key}: "
        return [ScannedCall(name, arguments + (value + "}" if final else value[:-1]))], end

    def _close(self, text: str, i: int) -> int | None:
        close = text.find(self.end_marker, i)
        return None if close < 0 else close + len(self.end_marker)


def _trimmed(raw: str) -> str:
    """A value without the newline after its open tag and the one before its close tag."""
    raw = raw[1:] if raw.startswith("\n") else raw
    return raw[:-1] if raw.endswith("\n") else raw


def _settled(raw: str) -> str:
    """The part of a value still being written that no tag to come can take back."""
    return raw[
        : min(partial_marker(raw, 0, m) for m in (_PARAMETER_END, _PARAMETER, _FUNCTION_END))
    ]
