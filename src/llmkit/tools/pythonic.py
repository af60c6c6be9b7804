"""``pythonic``: a Python list of calls, ``[get_weather(city="Paris"), f(a=1)]`` (Llama 3.2+
and 4), keyword arguments only, each a Python literal."""

from __future__ import annotations

import ast
import json
import re

from llmkit.tools.base import ScannedCall
from llmkit.tools.json_scan import skip_ws
from llmkit.tools.marked import MarkedParser

# A list of calls opens the output or follows a blank: "[name(".
_START = re.compile(r"(?:^|(?<=\s))\[\s*[A-Za-z_][\w.]*\s*\(")
_MAYBE_START = re.compile(r"(?:^|(?<=\s))\[\s*(?:[A-Za-z_][\w.]*\s*)?$")
_NAME = re.compile(r"[A-Za-z_][\w.]*")
_KEYWORD = re.compile(r"([A-Za-z_]\w*)\s*=\s*")
_OPEN = {"(": ")", "[": "]", "{": "}"}


class _Cut(Exception):
    """The text ends inside the list, or stops being one."""


class PythonicToolParser(MarkedParser):
    def find_region(self, text: str, i: int) -> int | None:
        found = _START.search(text, i)
        return None if found is None else found.start()

    def pending(self, text: str, i: int) -> int:
        found = _MAYBE_START.search(text, i)
        return len(text) if found is None else found.start()

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        calls: list[ScannedCall | None] = []
        open_call: ScannedCall | None = None
        i = skip_ws(text, start + 1)
        try:
            while True:
                name = _NAME.match(text, i)
                if name is None:
                    raise _Cut
                i = skip_ws(text, name.end())
                if text[i : i + 1] != "(":
                    raise _Cut
                pairs: list[str] = []
                open_call = ScannedCall(name.group(), "{")
                calls.append(open_call)
                i = skip_ws(text, i + 1)
                while text[i : i + 1] != ")":
                    keyword = _KEYWORD.match(text, i)
                    if keyword is None:
                        raise _Cut
                    end = _value_end(text, keyword.end())
                    try:
                        value = ast.literal_eval(text[keyword.end() : end].strip())
                    except (ValueError, SyntaxError, MemoryError, RecursionError):
                        raise _Cut from None
                    pairs.append(
                        f"{json.dumps(keyword.group(1))}: {json.dumps(value, ensure_ascii=False)}"
                    )
                    open_call = ScannedCall(name.group(), "{" + ", ".join(pairs))
                    calls[-1] = open_call
                    i = skip_ws(text, end)
                    if text[i : i + 1] == ",":
                        i = skip_ws(text, i + 1)
                calls[-1] = ScannedCall(name.group(), "{" + ", ".join(pairs) + "}")
                open_call = None
                i = skip_ws(text, i + 1)
                if text[i : i + 1] == "]":
                    return calls, i + 1
                if text[i : i + 1] != ",":
                    raise _Cut
                i = skip_ws(text, i + 1)
        except _Cut:
            pass
        if final and open_call is not None:
            calls[-1] = ScannedCall(open_call.name, open_call.arguments + "}")
        return calls, None


def _value_end(text: str, i: int) -> int:
    """Where the Python literal at ``text[i]`` ends: at a ``,`` or ``)`` outside brackets
    and strings. Raises _Cut if the text ends first."""
    closers: list[str] = []
    quote = ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in _OPEN:
            closers.append(_OPEN[c])
        elif closers and c == closers[-1]:
            closers.pop()
        elif not closers and c in ",)":
            return i
        i += 1
    raise _Cut
