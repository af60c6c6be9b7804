"""The reasoning parser interface: which part of the output is reasoning, which the answer."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


class ReasoningParser(ABC):
    """Splits model output into reasoning and content. Subclasses implement ``split``.

    The contract, as for tool parsers: for a text ``t`` and any longer ``u`` starting
    with it, ``split(t, final=False)``'s two parts are prefixes of ``split(u, ...)``'s;
    ``final=True`` releases what was held back. Markers appear in neither part.
    """

    # As ToolParser's: markers that are special tokens need skip_special_tokens off.
    special_markup: bool = False

    @abstractmethod
    def split(self, text: str, final: bool) -> tuple[str, str]:
        """``(reasoning, content)`` of ``text``, all the output so far."""


class ThinkParser(ReasoningParser):
    """Reasoning between ``start`` and ``end`` markers at the start of the output.

    ``implicit_start``: the chat template already opened the reasoning (DeepSeek-R1), so
    everything before ``end`` is reasoning, with or without ``start``; otherwise output
    that does not open with ``start`` is all content.
    """

    start = "<think>"
    end = "</think>"
    implicit_start = False

    def split(self, text: str, final: bool) -> tuple[str, str]:
        body = text.lstrip()
        if body.startswith(self.start):
            body = body[len(self.start) :]
        elif self.start.startswith(body) and (not final or len(body) >= 2):
            return "", ""  # it may still open with the marker, or max_tokens cut it
        elif not self.implicit_start:
            return "", text
        close = body.find(self.end)
        if close < 0:
            cut = _partial_suffix(body, self.end)
            # A final text drops a cut marker, but not a lone first character (see cut_marker).
            if not final or len(body) - cut >= 2:
                body = body[:cut]
            return body, ""
        return body[:close], body[close + len(self.end) :].lstrip()


def _partial_suffix(text: str, marker: str) -> int:
    """Where a suffix of ``text`` that begins ``marker`` starts (``len(text)`` if none)."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[len(text) - size :]):
            return len(text) - size
    return len(text)


@dataclass
class ReasoningStream:
    """Feeds text deltas through a parser; returns the reasoning and content deltas."""

    parser: ReasoningParser
    text: str = ""
    _sent: list[str] = field(default_factory=lambda: ["", ""])

    def feed(self, delta: str, final: bool = False) -> tuple[str, str]:
        self.text += delta
        parts = self.parser.split(self.text, final)
        out = []
        for k, part in enumerate(parts):
            sent = self._sent[k]
            if part.startswith(sent):
                out.append(part[len(sent) :])
                self._sent[k] = part
            else:
                out.append("")
        return out[0], out[1]
