"""Reasoning parsers: ``reasoning_content`` apart from ``content``.

Parsers are plugins (entry point group ``llmkit.reasoning_parsers``); llmkit's own are
registered the same way in its ``pyproject.toml``.
"""

from llmkit.reasoning.base import ReasoningParser, ReasoningStream, ThinkParser

__all__ = ["ReasoningParser", "ReasoningStream", "ThinkParser"]
