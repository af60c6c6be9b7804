"""The exceptions llmkit raises at its public boundary.

Invalid input is a ``ValueError`` (raised before anything is queued); a
:class:`ParamError` when one parameter is to blame, naming it. Everything else derives
from :class:`LLMKitError`::

    LLMKitError
    ├── EngineDeadError        the engine stopped and cannot serve any request
    ├── EngineNotStartedError  the engine was never started (``async with engine``)
    ├── EngineOverloadedError  the engine's queue is full (or a request waited too long); retry
    ├── RequestFailedError     the engine failed while computing this request
    └── PluginError            a named plugin is missing or failed to import (also a ValueError)
"""

from __future__ import annotations


class ParamError(ValueError):
    """Bad input that one parameter is to blame for: ``param`` names it (``top_p``,
    ``structured_outputs``), and the message starts with that name. Still a ValueError,
    as all bad input is; the serving layer answers it with a 400 naming ``param``."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param

    def __reduce__(self) -> tuple[type[ParamError], tuple[str, str]]:
        # Raised in a Ray replica, it crosses to the caller pickled.
        return (ParamError, (self.param, str(self)))

    def renamed(self, names: dict[str, str]) -> ParamError:
        """The same error naming the parameter as the caller knows it (``names``: the
        engine's names -> the caller's), in ``param`` and at the start of the message."""
        new = names.get(self.param)
        if new is None:
            return self
        return ParamError(new, new + str(self).removeprefix(self.param))


class LLMKitError(Exception):
    """Base of llmkit's own errors."""


class EngineDeadError(LLMKitError):
    """The engine's step loop has stopped (shut down or crashed); create a new engine."""


class EngineNotStartedError(LLMKitError):
    """A request came before the engine was started: use ``async with engine`` or ``start()``."""


class RequestFailedError(LLMKitError):
    """A step that computed this request failed; other requests were not affected."""


class EngineOverloadedError(LLMKitError):
    """The engine refused or dropped a request because its queue is full or too slow.

    Raised before anything is queued when ``max_queued_requests`` or ``max_queued_tokens``
    is reached (``reason`` "queued_requests" / "queued_tokens"), and from a request's stream
    when it waited longer than ``max_queue_wait_s`` for its first step ("queue_wait").
    ``retry_after_s`` is the engine's hint of when a retry may be admitted.
    """

    def __init__(self, message: str, retry_after_s: float = 1.0, reason: str = "queued_requests"):
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.reason = reason


class InternalError(LLMKitError, RuntimeError):
    """llmkit broke one of its own rules: a bug to report (a request's impossible change of
    state, more adapters in one step than slots, a Triton kernel launched where it cannot run)."""


class PluginError(LLMKitError, ValueError):
    """A plugin named by a setting is not installed, or its entry point failed to load."""
