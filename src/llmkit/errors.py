"""The exceptions llmkit raises at its public boundary.

Invalid input is a plain ``ValueError`` (raised before anything is queued). Everything
else derives from :class:`LLMKitError`::

    LLMKitError
    ├── EngineDeadError        the engine stopped and cannot serve any request
    ├── EngineNotStartedError  the engine was never started (``async with engine``)
    ├── RequestFailedError     the engine failed while computing this request
    └── PluginError            a named plugin is missing or failed to import (also a ValueError)
"""

from __future__ import annotations


class LLMKitError(Exception):
    """Base of llmkit's own errors."""


class EngineDeadError(LLMKitError):
    """The engine's step loop has stopped (shut down or crashed); create a new engine."""


class EngineNotStartedError(LLMKitError):
    """A request came before the engine was started: use ``async with engine`` or ``start()``."""


class RequestFailedError(LLMKitError):
    """A step that computed this request failed; other requests were not affected."""


class PluginError(LLMKitError, ValueError):
    """A plugin named by a setting is not installed, or its entry point failed to load."""
