"""Plugins: entry points found by group and name, loaded lazily (:mod:`.discovery`), and what
each group needs of what it loads, checked at load (:mod:`.checks`)."""

from __future__ import annotations

from llmkit.plugins.discovery import (
    CHAT_TEMPLATES,
    GROUPS,
    REASONING_PARSERS,
    TOOL_PARSERS,
    Plugin,
    find,
    installed,
    load,
)

__all__ = [
    "CHAT_TEMPLATES",
    "GROUPS",
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "Plugin",
    "find",
    "installed",
    "load",
]
