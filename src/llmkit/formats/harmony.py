"""OpenAI's Harmony format (gpt-oss) read into its messages, for the ``openai`` tool and
reasoning parsers: ``<|channel|>analysis<|message|>...<|end|>``, ``<|start|>assistant
<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>``,
``<|channel|>final<|message|>...<|return|>``."""

from __future__ import annotations

import re
from dataclasses import dataclass

MESSAGE = "<|message|>"
_HEADS = ("<|start|>", "<|channel|>")
_ENDS = ("<|end|>", "<|call|>", "<|return|>")
_MARKERS = (*_HEADS, MESSAGE, *_ENDS, "<|constrain|>")
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*([^\s<]+)")
# The generation prompt ends in <|start|>assistant: the first header may begin right after.
_TO = "to="


@dataclass(frozen=True)
class Part:
    """Plain text (``header`` None) or a message: its header text, its channel and
    recipient, and its body as far as it is certain (a marker cut short held back while
    the text grows); ``start``/``end`` bound the whole part in the text (``end``: after its
    end marker); ``done``: the body has ended."""

    start: int
    end: int
    body: str
    header: str | None = None
    channel: str | None = None
    recipient: str | None = None
    done: bool = True


def read(text: str, final: bool) -> tuple[list[Part], bool]:
    """The parts of ``text``, and whether it ends inside a header not yet whole (the rest
    is not content: it may still name a channel or recipient)."""
    parts: list[Part] = []
    rest = text.lstrip()
    if not final and rest and _TO.startswith(rest):
        return parts, True
    i = 0
    while i < len(text):
        head = _next_head(text, i)
        if head > i:
            stop = head if head < len(text) else hold(text, i, final)
            parts.append(Part(i, stop, text[i:stop]))
        if head >= len(text):
            return parts, False
        opens = text.find(MESSAGE, head)
        if opens < 0:
            return parts, True
        header = text[head:opens]
        channel = _CHANNEL.search(header)
        recipient = _RECIPIENT.search(header)
        body = opens + len(MESSAGE)
        ends = [(text.find(m, body), m) for m in (*_ENDS, *_HEADS)]
        close, marker = min(((k, m) for k, m in ends if k >= 0), default=(-1, ""))
        done = close >= 0
        if not done:
            close = hold(text, body, final)
        after = close + len(marker) if marker in _ENDS else close
        parts.append(
            Part(
                head,
                after if done else close,
                text[body:close],
                header,
                channel.group(1) if channel else None,
                recipient.group(1) if recipient else None,
                done,
            )
        )
        i = after if done else len(text)
    return parts, False


def hold(text: str, i: int, final: bool) -> int:
    """Where the text from ``i`` stops being certain: before a tail that may still become
    a marker while the text grows; before a marker that ``max_tokens`` cut (two or more of
    its characters) once it is complete."""
    longest = max(len(m) for m in _MARKERS) - 1
    for size in range(min(longest, len(text) - i), 0, -1):
        tail = text[len(text) - size :]
        if any(m.startswith(tail) for m in _MARKERS) and (not final or size >= 2):
            return len(text) - size
    return len(text)


def _next_head(text: str, i: int) -> int:
    """Where the next header starts at or after ``i`` (``len(text)`` if none)."""
    if i == 0 and text.lstrip().startswith(_TO):
        return len(text) - len(text.lstrip())
    found = [k for k in (text.find(m, i) for m in _HEADS) if k >= 0]
    return min(found, default=len(text))
