"""The built-in ``<think>...</think>`` reasoning parsers."""

from __future__ import annotations

from llmkit.reasoning.base import ThinkParser


class DeepSeekR1ReasoningParser(ThinkParser):
    """DeepSeek-R1: its template opens ``<think>``; all output before ``</think>`` is
    reasoning."""

    implicit_start = True


class Qwen3ReasoningParser(ThinkParser):
    """Qwen3: reasoning only inside a ``<think>...</think>`` that opens the output (none
    when thinking is switched off)."""
