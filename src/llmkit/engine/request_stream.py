"""RequestStream: the async iterator over one request's outputs, woken from the core thread.

The core thread only appends to the request's state and wakes the reader; the reader
builds one output from whatever arrived since it last read, so a slow reader costs the
engine nothing. Dropping or closing the stream, or cancelling the task reading it, aborts
the request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar, cast

import anyio

from llmkit.engine.loop import threadsafe_scheduler
from llmkit.engine.output_state import RequestState
from llmkit.errors import EngineDeadError, RequestFailedError
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput

Output = TypeVar("Output", RequestOutput, EmbeddingRequestOutput)


class RequestStream(Generic[Output]):
    """Async iterator over one request's outputs; leaving it early aborts the request."""

    def __init__(
        self,
        state: RequestState,
        engine_error: Callable[[], BaseException | None],
        release: Callable[[RequestState], None],
    ):
        self._state = state
        self._engine_error = engine_error  # why the engine stopped, once it has
        self._release = release  # the engine forgets the stream, aborting what still runs
        self._schedule = threadsafe_scheduler()
        self._event: anyio.Event | None = None
        self._wake_pending = False
        self._done = False

    @property
    def request_id(self) -> str:
        return self._state.request_id

    def __aiter__(self) -> RequestStream[Output]:
        return self

    async def __anext__(self) -> Output:
        if self._done:
            raise StopAsyncIteration
        try:
            while True:
                dead = self._engine_error()
                # The output first: the core sets a failed request's error before it ends
                # it, so a final output taken here comes with its error visible below.
                output = self._state.take_output()
                error = self._state.error
                if error is not None:
                    raise self._state.failure or RequestFailedError(error)
                if output is not None:
                    if output.finished:
                        self._close()
                    # The state is a pooling one exactly when Output is the embedding type.
                    return cast(Output, output)
                if dead is not None:
                    raise EngineDeadError(f"the engine stopped: {dead}") from None
                self._event = anyio.Event()
                # Re-check after publishing the event, or a wake in between would be lost.
                if self._state.finished or self._state.error or self._engine_error():
                    continue
                await self._event.wait()
        except BaseException:
            self._close()
            raise

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading; aborts the request if it still runs."""
        self._close()

    def _close(self) -> None:
        if not self._done:
            self._done = True
            self._release(self._state)

    def __del__(self) -> None:
        # A consumer that breaks out of ``async for`` simply drops the stream.
        if not getattr(self, "_done", True):
            self._close()

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
