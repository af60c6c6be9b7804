"""Reasoning between ``[THINK]`` and ``[/THINK]`` (Magistral's markers)."""

from __future__ import annotations

from llmkit.reasoning import ThinkParser


class BracketThinkParser(ThinkParser):
    start = "[THINK]"
    end = "[/THINK]"
