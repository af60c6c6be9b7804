"""The tool-call parser interface: one ``scan`` serves whole texts and streams alike.

A parser reads the text a model has written so far and says which part of it is plain
content and which calls it holds. Streaming (see ``stream.py``) scans the growing text
after every delta and sends what changed, so it gives the same calls as scanning the
whole text once, by construction.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from llmkit.tools.json_scan import (
    Malformed,
    Truncated,
    expect,
    safe_prefix,
    skip_ws,
    string_end,
    value_end,
)


@dataclass(frozen=True)
class ScannedCall:
    """A call as far as it is written: ``name`` is None until the whole name is;
    ``arguments`` is JSON text that only ever grows (a whole JSON value once the call or
    the text has ended). ``id``: the call's id where the format writes one (Kimi-K2's
    ``functions.NAME:0``), else the stream makes one up."""

    name: str | None
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Scan:
    """``content``: the text outside tool markup that is certain to stay content."""

    content: str
    calls: list[ScannedCall]


class ToolParser(ABC):
    """Finds tool calls in model output. Subclasses implement ``scan``.

    The contract, for a text ``t`` and any longer text ``u`` that starts with it:
    ``scan(t, final=False)``'s content and each call's name (once set) and arguments are
    prefixes of ``scan(u, ...)``'s; ``final=True`` (the text is complete, perhaps cut by
    ``max_tokens``) releases held-back content (not a marker cut short: that is not
    content) and closes every call's arguments into
    valid JSON (but the parsers of forced calls, which keep a cut call's arguments as
    written, as OpenAI does). Calls without a name are dropped. No markup may reach ``content``.

    ``calls_in_reasoning``: a call the model writes inside its reasoning is still a call
    (the server scans the reasoning too); False where the family's template says calls
    never come from there.
    """

    calls_in_reasoning: bool = True
    # The format's markers are special tokens, which reach the text only when the output is
    # decoded with skip_special_tokens off: the server turns it off, as vLLM does.
    special_markup: bool = False

    @abstractmethod
    def scan(self, text: str, final: bool) -> Scan:
        """What ``text`` (all the model output so far) holds."""

    # A hook: most formats write JSON arguments and need no schema.
    def use_tools(self, tools: list[dict[str, Any]]) -> None:  # noqa: B027
        """The request's ``tools``, before any ``scan``: formats that write argument values
        as text (Qwen3-Coder's XML) type them from each tool's JSON schema."""


@dataclass(frozen=True)
class CallObject:
    """What ``read_call_object`` found: the call (None while it has no name), the index
    after the object (None if the text ends inside it or it is malformed), and whether
    it is malformed (the call ends where the JSON broke)."""

    call: ScannedCall | None
    end: int | None
    broken: bool


def read_call_object(
    text: str,
    i: int,
    final: bool,
    args_keys: tuple[str, ...] = ("arguments", "parameters"),
    keep_cut: bool = False,
) -> CallObject:
    """Reads ``{"name": ..., "arguments": {...}}`` at ``text[i]`` (blanks skipped).

    ``keep_cut``: a final text that ends inside the arguments keeps them as written
    instead of closing them (what OpenAI returns for a forced call cut by max_tokens).
    """
    name: str | None = None
    args_start: int | None = None
    arguments: str | None = None
    end: int | None = None
    broken = False
    try:
        i = expect(text, i, "{")
        i = skip_ws(text, i)
        if text[i : i + 1] == "}":
            end = i + 1
        while end is None:
            i = skip_ws(text, i)
            if i >= len(text):
                raise Truncated
            if text[i] != '"':
                raise Malformed
            key_end = string_end(text, i)
            key = json.loads(text[i:key_end])
            start = skip_ws(text, expect(text, key_end, ":"))
            if key in args_keys and args_start is None:
                args_start = start
            stop = value_end(text, start)
            if key == "name" and name is None:
                value = json.loads(text[start:stop])
                if not isinstance(value, str):
                    raise Malformed
                name = value
            if start == args_start:
                arguments = text[start:stop]
            i = skip_ws(text, stop)
            if i >= len(text):
                raise Truncated
            if text[i] == "}":
                end = i + 1
            else:
                i = expect(text, i, ",")
    except Truncated:
        pass
    except Malformed:
        broken = True
    if arguments is None and keep_cut and final and end is None and not broken:
        arguments = text[args_start:] if args_start is not None else ""
    if arguments is None:
        if args_start is None:
            arguments = "{}" if (end is not None or final or broken) else ""
        else:
            n, closers = safe_prefix(text[args_start:])
            arguments = text[args_start : args_start + n]
            if end is not None or final or broken:
                arguments = (arguments + closers) or "{}"
    return CallObject(ScannedCall(name, arguments) if name else None, end, broken)


def read_call_list(
    text: str,
    i: int,
    final: bool,
    args_keys: tuple[str, ...] = ("arguments", "parameters"),
    keep_cut: bool = False,
) -> tuple[list[ScannedCall | None], int | None]:
    """Reads a JSON list of call objects at ``text[i]`` (a ``[``): the calls, and the index
    after the list (None if the text ends inside it or it is not such a list).
    ``keep_cut``: as ``read_call_object``'s."""
    calls: list[ScannedCall | None] = []
    i = skip_ws(text, i + 1)
    if text[i : i + 1] == "]":
        return calls, i + 1
    while True:
        found = read_call_object(text, i, final, args_keys, keep_cut)
        calls.append(found.call)
        if found.end is None:
            return calls, None
        i = skip_ws(text, found.end)
        if text[i : i + 1] == "]":
            return calls, i + 1
        if text[i : i + 1] != ",":
            # Cut short, or not the list it should be: the rest is not content either.
            return calls, None
        i = skip_ws(text, i + 1)
