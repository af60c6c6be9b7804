"""RequestStream: the async iterator over one request's outputs, woken from the core thread.

The core thread only appends to the request's state and wakes the reader; the reader
builds one output from whatever arrived since it last read, so a slow reader costs the
engine nothing. Dropping or closing the stream, or cancelling the task reading it, aborts
the request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import cast

import anyio

from llmkit.engine.core.output_state import RequestState
from llmkit.engine.loop import threadsafe_scheduler
from llmkit.engine.output_stream import EngineStream, Output
from llmkit.errors import EngineDeadError, RequestFailedError


class RequestStream(EngineStream[Output]):
    """Async iterator over one request's outputs; leaving it early aborts the request."""

    def __init__(
        self,
        state: RequestState,
        engine_error: Callable[[], BaseException | None],
        release: Callable[[RequestState], None],
    ):
        super().__init__()
        self._state = state
        self._engine_error = engine_error  # why the engine stopped, once it has
        self._forget = release  # the engine forgets the stream, aborting what still runs
        self._schedule = threadsafe_scheduler()
        self._event: anyio.Event | None = None
        self._wake_pending = False

    @property
    def request_id(self) -> str:
        return self._state.request_id

    async def _next(self) -> Output:
        while True:
            dead = self._engine_error()
            # The output first: the core sets a failed request's error before it ends
            # it, so a final output taken here comes with its error visible below.
            output = self._state.take_output()
            error = self._state.error
            if error is not None:
                raise self._state.failure or RequestFailedError(error)
            if output is not None:
                # The state is a pooling one exactly when Output is the embedding type.
                return cast(Output, output)
            if dead is not None:
                raise EngineDeadError(f"the engine stopped: {dead}") from None
            self._event = anyio.Event()
            # Re-check after publishing the event, or a wake in between would be lost.
            if self._state.finished or self._state.error or self._engine_error():
                continue
            await self._event.wait()

    def _release(self) -> None:
        self._forget(self._state)

    def _wake_from_core(self) -> None:
        """Called on the core thread: schedule one wake-up on the reader's loop."""
        if self._wake_pending:
            return
        self._wake_pending = True
        # A RuntimeError means the reader's event loop is gone: nobody is waiting.
        with contextlib.suppress(RuntimeError):
            self._schedule(self._wake)

    def _wake(self) -> None:
        self._wake_pending = False
        if self._event is not None:
            self._event.set()
