"""Reasoning between ``[THINK]`` and ``[/THINK]`` (Magistral's markers)."""

from __future__ import annotations

from llmkit.plugin_api import ThinkParser

requires_llmkit_plugin_api = 1


class BracketThinkParser(ThinkParser):
    start = "[THINK]"
    end = "[/THINK]"
