"""EngineStream: the skeleton of every engine's per-request stream (in process, socket, Ray).

Each engine fills in how the next output arrives (``_next``) and what closing a stream
that may still run does (``_release``); iteration, closing once and aborting a dropped
stream are written here once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from llmkit.outputs import EmbeddingRequestOutput, RequestOutput

Output = TypeVar("Output", RequestOutput, EmbeddingRequestOutput)


class EngineStream(ABC, Generic[Output]):
    """One request's outputs; leaving the ``async for`` early (or ``close``) aborts it."""

    def __init__(self) -> None:
        self._done = False

    @property
    @abstractmethod
    def request_id(self) -> str: ...

    @abstractmethod
    async def _next(self) -> Output:
        """Wait for the next output; raise what ends the request if it failed."""

    @abstractmethod
    def _release(self) -> None:
        """The reader is gone: forget the request, and abort it if it still runs."""

    def __aiter__(self) -> EngineStream[Output]:
        return self

    async def __anext__(self) -> Output:
        if self._done:
            raise StopAsyncIteration
        try:
            output = await self._next()
        except BaseException:
            self.close()
            raise
        if output.finished:
            self.close()
        return output

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading; aborts the request if it still runs. Needs no event loop."""
        if not self._done:
            self._done = True
            self._release()

    def __del__(self) -> None:
        # A consumer that breaks out of ``async for`` simply drops the stream.
        if not getattr(self, "_done", True):
            self.close()
