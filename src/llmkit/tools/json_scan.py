"""Reading JSON that may be cut short: where values end, and how to close a cut one.

A tool call streams while the model writes it, so its JSON is read many times, each time
a little longer. Everything here depends only on the text so far, which is what keeps the
streamed argument fragments a prefix of the final arguments.
"""

from __future__ import annotations

import json

_WS = " \t\n\r"
_LITERALS = ("true", "false", "null")
_NUMBER_CHARS = frozenset("0123456789+-.eE")


class Truncated(Exception):
    """The text ended inside the value."""


class Malformed(Exception):
    """The text is not JSON at this point."""


def skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def value_end(text: str, i: int) -> int:
    """The end of the JSON value starting at ``text[i]`` (no leading blanks).

    Raises Truncated if the text ends first, Malformed if it is not JSON.
    """
    if i >= len(text):
        raise Truncated
    c = text[i]
    if c == '"':
        return string_end(text, i)
    if c in "{[":
        close = "}" if c == "{" else "]"
        i = skip_ws(text, i + 1)
        if i < len(text) and text[i] == close:
            return i + 1
        while True:
            if c == "{":
                i = skip_ws(text, i)
                if i >= len(text):
                    raise Truncated
                if text[i] != '"':
                    raise Malformed
                i = expect(text, skip_ws(text, string_end(text, i)), ":")
            i = value_end(text, skip_ws(text, i))
            i = skip_ws(text, i)
            if i >= len(text):
                raise Truncated
            if text[i] == close:
                return i + 1
            i = expect(text, i, ",")
    for literal in _LITERALS:
        if text.startswith(literal, i):
            return _terminated(text, i + len(literal))
        if literal.startswith(text[i : i + len(literal)]) and i + len(literal) > len(text):
            raise Truncated
    j = i
    while j < len(text) and text[j] in _NUMBER_CHARS:
        j += 1
    if j == i:
        raise Malformed
    end = _terminated(text, j)
    try:
        json.loads(text[i:j])
    except ValueError:
        raise Malformed from None
    return end


def _terminated(text: str, j: int) -> int:
    """A literal or number ends at ``j`` only once the next character shows it ended."""
    if j >= len(text):
        raise Truncated
    if text[j] not in _WS and text[j] not in ",]}":
        raise Malformed
    return j


def string_end(text: str, i: int) -> int:
    """The end of the string starting at ``text[i] == '"'``."""
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            return j + 1
        if c < " ":
            raise Malformed
        j += 1
    raise Truncated


def expect(text: str, i: int, char: str) -> int:
    i = skip_ws(text, i)
    if i >= len(text):
        raise Truncated
    if text[i] != char:
        raise Malformed
    return i + 1


def safe_prefix(text: str) -> tuple[int, str]:
    """For JSON cut short: ``(n, closers)``, the longest cut ``text[:n]`` that
    ``closers`` turn into valid JSON without inventing any key or value.

    A cut is safe right after ``{`` or ``[``, after a value that has visibly ended, and
    inside a string value (not a key) outside an escape; reading stops where the text
    stops being JSON. A longer text never moves the cut back, so successive cuts of a
    growing text are prefixes of one another.
    """
    # Each open container: its closer, and what it expects next: "key", ":", "value",
    # "," (a comma or the closer), or, just opened, "okey" / "oval" (or the closer).
    stack: list[list[str]] = []
    best, best_closers = 0, ""
    i, n = 0, len(text)

    def closers(extra: str = "") -> str:
        return extra + "".join(frame[0] for frame in reversed(stack))

    def ended(at: int) -> bool:
        """A value ended at ``at``: record the cut; True if it was the whole text's value."""
        nonlocal best, best_closers
        if not stack:
            return True
        stack[-1][1] = ","
        best, best_closers = at, closers()
        return False

    while i < n:
        c = text[i]
        if c in _WS:
            i += 1
            continue
        expecting = stack[-1][1] if stack else "value"
        if c in "}]":
            if not stack or stack[-1][0] != c or expecting not in (",", "okey", "oval"):
                break
            stack.pop()
            i += 1
            if ended(i):
                return i, ""
        elif c == ",":
            if expecting != ",":
                break
            stack[-1][1] = "key" if stack[-1][0] == "}" else "value"
            i += 1
        elif c == ":":
            if expecting != ":":
                break
            stack[-1][1] = "value"
            i += 1
        elif c == '"':
            is_key = expecting in ("key", "okey")
            if not is_key and expecting not in ("value", "oval"):
                break
            j = i + 1
            if not is_key:
                best, best_closers = j, closers('"')
            while j < n and text[j] != '"':
                if text[j] < " ":
                    return best, best_closers
                j += (6 if text[j + 1 : j + 2] == "u" else 2) if text[j] == "\\" else 1
                if j <= n and not is_key:
                    best, best_closers = j, closers('"')
            if j >= n:
                break
            i = j + 1
            if is_key:
                stack[-1][1] = ":"
            elif ended(i):
                return i, ""
        elif expecting not in ("value", "oval"):
            break
        elif c in "{[":
            stack.append(["}", "okey"] if c == "{" else ["]", "oval"])
            i += 1
            best, best_closers = i, closers()
        else:
            # A number or literal: it has ended once the next character is not part of it.
            j = i
            while j < n and (text[j] in _NUMBER_CHARS or text[j].isalpha()):
                j += 1
            if j >= n:
                break
            try:
                json.loads(text[i:j])
            except ValueError:
                break
            i = j
            if ended(i):
                return i, ""
    return best, best_closers


def close_json(text: str) -> str:
    """``text`` itself if it is one whole JSON value, else its safe prefix closed."""
    start = skip_ws(text, 0)
    try:
        end = value_end(text, start)
    except (Truncated, Malformed):
        n, closers = safe_prefix(text)
        return text[:n] + closers
    return text[:end]
