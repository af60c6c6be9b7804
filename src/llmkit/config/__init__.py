"""The engine's one configuration, :class:`EngineConfig` (vLLM's engine arguments), the
checks its fields share, and ``option()``: a settings field that declares its flag."""

from __future__ import annotations

from llmkit.config.engine import EngineConfig

__all__ = ["EngineConfig"]
