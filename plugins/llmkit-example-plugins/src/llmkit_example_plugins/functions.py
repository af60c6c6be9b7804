"""Tool calls written as ``<function=NAME>{"arg": ...}</function>`` (Llama 3.1's
custom-tool format)."""

from __future__ import annotations

import re

from llmkit.plugin_api import (
    Malformed,
    MarkerParser,
    ScannedCall,
    Truncated,
    safe_prefix,
    skip_ws,
    value_end,
)

requires_llmkit_plugin_api = 1

_NAME = re.compile(r"([A-Za-z_][\w.-]*)>")


class FunctionTagParser(MarkerParser):
    start_marker = "<function="
    end_marker = "</function>"

    def read_region(
        self, text: str, start: int, final: bool
    ) -> tuple[list[ScannedCall | None], int | None]:
        name = _NAME.match(text, start + len(self.start_marker))
        if name is None:
            # Not yet a whole name (or not one at all): no call, and nothing after is content.
            return [], None
        body = skip_ws(text, name.end())
        try:
            end = value_end(text, body)
        except Truncated:
            n, closers = safe_prefix(text[body:])
            arguments = text[body : body + n]
            if final:
                arguments = (arguments + closers) or "{}"
            return [ScannedCall(name.group(1), arguments)], None
        except Malformed:
            n, closers = safe_prefix(text[body:])
            arguments = (text[body : body + n] + closers) or "{}"
            end = body
        else:
            arguments = text[body:end]
        close = text.find(self.end_marker, end)
        call = ScannedCall(name.group(1), arguments)
        return [call], None if close < 0 else close + len(self.end_marker)
