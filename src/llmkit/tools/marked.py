"""Parsers for content with tool markup regions in it: find a region, read its calls."""

from __future__ import annotations

from abc import abstractmethod

from llmkit.tools.base import Scan, ScannedCall, ToolParser


class MarkedParser(ToolParser):
    """Text is content, except for regions of tool markup that subclasses find and read.

    Blanks next to a region are not content. While the text is growing, a tail that may
    still become a region (part of a start marker, trailing blanks) is held back; once it
    is complete, a tail that ``cut`` says is a marker cut short is dropped.
    """

    @abstractmethod
    def find_region(self, text: str, i: int) -> int | None:
        """Where the next region at or after ``i`` starts, if one has."""

    @abstractmethod
    def pending(self, text: str, i: int) -> int:
        """Where a tail of ``text[i:]`` that may still become a region starts
        (``len(text)`` if none)."""

    @abstractmethod
    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        """The calls of the region at ``start``, and where it ends (None: not yet seen)."""

    def cut(self, text: str, i: int) -> int:
        """Where a complete ``text`` stops being content at its end (``len(text)`` unless
        ``max_tokens`` cut a marker there)."""
        return len(text)

    def scan(self, text: str, final: bool) -> Scan:
        parts: list[str] = []
        calls: list[ScannedCall] = []
        i, after_region = 0, False
        while True:
            start = self.find_region(text, i)
            stop = start
            if stop is None:
                stop = self.cut(text, i) if final else self.pending(text, i)
            part = text[i:stop]
            if after_region:
                part = part.lstrip()
            if start is not None or not final or stop < len(text):
                part = part.rstrip()
            parts.append(part)
            if start is None:
                break
            found, end = self.read_region(text, start, final)
            calls.extend(call for call in found if call is not None)
            if end is None:
                break
            i, after_region = end, True
        return Scan("".join(parts), calls)


class MarkerParser(MarkedParser):
    """Regions that open with a fixed marker."""

    start_marker: str

    def find_region(self, text: str, i: int) -> int | None:
        found = text.find(self.start_marker, i)
        return None if found < 0 else found

    def pending(self, text: str, i: int) -> int:
        return partial_marker(text, i, self.start_marker)

    def cut(self, text: str, i: int) -> int:
        return cut_marker(text, i, self.start_marker)


def partial_marker(text: str, i: int, marker: str) -> int:
    """Where a suffix of ``text[i:]`` that begins ``marker`` starts (``len(text)`` if none)."""
    for size in range(min(len(marker) - 1, len(text) - i), 0, -1):
        if marker.startswith(text[len(text) - size :]):
            return len(text) - size
    return len(text)


def cut_marker(text: str, i: int, marker: str) -> int:
    """Where a complete ``text[i:]`` ends in a ``marker`` that ``max_tokens`` cut short
    (``len(text)`` if it does not). One character is not taken for a cut marker: as
    the last character of an answer, ``<`` or ``[`` is more likely text."""
    start = partial_marker(text, i, marker)
    return start if len(text) - start >= 2 else len(text)
