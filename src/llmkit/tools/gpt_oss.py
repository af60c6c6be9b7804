"""``openai``: gpt-oss's Harmony calls, ``<|channel|>commentary to=functions.NAME
<|constrain|>json<|message|>{...}<|call|>``; final-channel text is content, analysis is not."""

from __future__ import annotations

from llmkit.formats.harmony import read
from llmkit.tools.base import Scan, ScannedCall, ToolParser
from llmkit.tools.sections import json_arguments

_FUNCTIONS = "functions."


class HarmonyToolParser(ToolParser):
    special_markup = True

    def scan(self, text: str, final: bool) -> Scan:
        parts, _ = read(text, final)
        content: list[str] = []
        calls: list[ScannedCall] = []
        after_message = False
        for k, part in enumerate(parts):
            if part.header is None:
                # Blanks next to a message are not content (as next to other formats' markup).
                piece = part.body.lstrip() if after_message else part.body
                if k + 1 < len(parts) or not final:
                    piece = piece.rstrip()
                content.append(piece)
                continue
            after_message = True
            recipient = part.recipient or ""
            if recipient.startswith(_FUNCTIONS):
                arguments, _ = json_arguments(part.body, 0, final or part.done)
                calls.append(ScannedCall(recipient[len(_FUNCTIONS) :], arguments))
            elif not recipient and part.channel != "analysis":
                content.append(part.body)
        return Scan("".join(content), calls)
