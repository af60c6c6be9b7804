"""ModelSettings: one named model the manager may load, and how it keeps it."""

from __future__ import annotations

from dataclasses import dataclass

from llmkit.config import EngineConfig


@dataclass(frozen=True)
class ModelSettings:
    """A model clients name: its engine config, whether it stays loaded (``pin``), and its own
    keep-alive in Ollama's syntax (None: the manager's default)."""

    name: str
    config: EngineConfig
    pin: bool = False
    keep_alive: str | float | None = None
    # Bytes it takes once loaded; None: estimated from its files (models/memory.py).
    resident_bytes: int | None = None

    @classmethod
    def of(
        cls,
        name: str,
        model: str,
        *,
        pin: bool = False,
        keep_alive: str | float | None = None,
        **engine: object,
    ) -> ModelSettings:
        """``name`` for ``model`` (a directory, a GGUF file, ``smollm2``) with engine fields."""
        return cls(name, EngineConfig.from_kwargs(model, **engine), pin, keep_alive)
