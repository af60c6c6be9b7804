"""Closing: the signal a stopping server sets when it will wait no longer for its requests."""

from __future__ import annotations

import anyio

from llmkit.serving.errors import OpenAIError


class Closing:
    """Set once, when a stopping server's grace period is over: every request still running
    then ends itself with :func:`shutting_down`'s error, so its client gets a whole answer
    rather than a cut connection.

    It runs on any anyio backend (each waiter makes its event in its own loop); call
    :meth:`set` from the event loop's thread.
    """

    def __init__(self) -> None:
        self._set = False
        self._waiters: set[anyio.Event] = set()

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        for event in self._waiters:
            event.set()

    async def wait(self) -> None:
        if self._set:
            return
        event = anyio.Event()
        self._waiters.add(event)
        try:
            await event.wait()
        finally:
            self._waiters.discard(event)

    async def cancel_when_set(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` once set (a task to start beside the work ``scope`` holds)."""
        await self.wait()
        scope.cancel()


def shutting_down() -> OpenAIError:
    """The error of a request stopped because the server is shutting down (a 503)."""
    return OpenAIError(
        503, "the server is shutting down; the request was stopped before it finished"
    )
