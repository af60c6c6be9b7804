"""``openai``: gpt-oss's Harmony analysis channel as reasoning, the rest as content.

A call message (``to=functions.NAME``) stays in the content as written, in any channel,
for the ``openai`` tool parser to read: a call made while reasoning is still a call.
"""

from __future__ import annotations

from llmkit.formats.harmony import read
from llmkit.reasoning.base import ReasoningParser


class HarmonyReasoningParser(ReasoningParser):
    special_markup = True

    def split(self, text: str, final: bool) -> tuple[str, str]:
        parts, _ = read(text, final)
        reasoning: list[str] = []
        content: list[str] = []
        for part in parts:
            if part.header is None:
                content.append(part.body)
            elif part.recipient:
                content.append(text[part.start : part.end])
            elif part.channel == "analysis":
                reasoning.append(part.body)
            else:
                content.append(part.body)
        return "\n".join(reasoning), "".join(content)
