"""The manager's refusals: an unknown model name, and a model that could not load."""

from __future__ import annotations

from llmkit.errors import LLMKitError


class ModelNotFoundError(LLMKitError, KeyError):
    """No model of this name is configured."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"model {self.name!r} not found"


class ModelLoadError(LLMKitError):
    """A model failed to load: its requests fail with this, every other model keeps serving."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"model {name!r} failed to load: {reason}")
        self.name = name
        self.reason = reason
