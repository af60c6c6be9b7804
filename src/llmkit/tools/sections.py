"""Calls in a marked section, each ``CALL_BEGIN header ARGS_BEGIN {json} CALL_END``
(DeepSeek-V3.1's and Kimi-K2's special-token formats)."""

from __future__ import annotations

from llmkit.tools.base import ScannedCall
from llmkit.tools.json_scan import Malformed, Truncated, safe_prefix, skip_ws, value_end
from llmkit.tools.marked import MarkerParser


def json_arguments(text: str, start: int, final: bool) -> tuple[str, int | None]:
    """The JSON arguments written at ``text[start]`` (blanks skipped) as far as they are
    safe to send, and the index after them (None while they run on). A complete ``final``
    text closes cut arguments; malformed ones end, closed, where they broke."""
    body = skip_ws(text, start)
    try:
        end = value_end(text, body)
    except Truncated:
        n, closers = safe_prefix(text[body:])
        arguments = text[body : body + n]
        return ((arguments + closers) or "{}") if final else arguments, None
    except Malformed:
        n, closers = safe_prefix(text[body:])
        return (text[body : body + n] + closers) or "{}", body
    return text[body:end], end


class SectionParser(MarkerParser):
    """A section (``start_marker`` ... ``section_end``) of calls. Subclasses set the
    markers and read a call's header (the text between ``call_begin`` and ``args_begin``)."""

    section_end: str
    call_begin: str
    args_begin: str
    call_end: str

    def header(self, text: str, index: int) -> ScannedCall:
        """The call (its arguments empty) that header ``text`` names: the ``index``-th of
        the section."""
        return ScannedCall(text.strip(), "")

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        calls: list[ScannedCall | None] = []
        i = start + len(self.start_marker)
        while True:
            i = skip_ws(text, i)
            if text.startswith(self.section_end, i):
                return calls, i + len(self.section_end)
            if not text.startswith(self.call_begin, i):
                # Cut short, or not a call: the section runs on to its end marker.
                close = text.find(self.section_end, i)
                return calls, None if close < 0 else close + len(self.section_end)
            head = i + len(self.call_begin)
            sep = text.find(self.args_begin, head)
            if sep < 0:
                return calls, None
            call = self.header(text[head:sep], len(calls))
            arguments, end = json_arguments(text, sep + len(self.args_begin), final)
            calls.append(ScannedCall(call.name, arguments, call.id))
            if end is None:
                return calls, None
            close = text.find(self.call_end, end)
            if close < 0:
                return calls, None
            i = close + len(self.call_end)
