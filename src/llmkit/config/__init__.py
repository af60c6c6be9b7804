"""The engine's one configuration, :class:`EngineConfig` (vLLM's engine arguments), and the
checks its fields share."""

from __future__ import annotations

from llmkit.config.engine import EngineConfig

__all__ = ["EngineConfig"]
