"""A request of an EngineClient in flight, and the stream its caller reads it through.

The client's reader task hands each request's outputs to its assembler, merging what a
slow reader has not taken yet, and wakes the stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import anyio

from llmkit.engine.output_stream import EngineStream, Output
from llmkit.errors import EngineDeadError
from llmkit.remote.output_assembly import OutputAssembler
from llmkit.sampling_params import PoolingParams, SamplingParams


class ClientRequest:
    """A request in flight, as the reader task and its stream share it."""

    def __init__(self, request_id: str, wire_id: str, params: SamplingParams | PoolingParams):
        self.request_id = request_id
        self.wire_id = wire_id
        self.assembler = OutputAssembler(params)
        self.error: Exception | None = None
        self.event: anyio.Event | None = None

    def wake(self) -> None:
        if self.event is not None:
            self.event.set()


class ClientStream(EngineStream[Output]):
    """One request's outputs; leaving the ``async for`` early (or ``close``) aborts it."""

    def __init__(
        self,
        request: ClientRequest,
        dead: Callable[[], str | None],
        drop: Callable[[ClientRequest], None],
    ):
        super().__init__()
        self._request = request
        self._dead = dead  # why the connection is over, once it is
        self._drop = drop  # the client forgets the request, aborting it if it still runs

    @property
    def request_id(self) -> str:
        return self._request.request_id

    async def _next(self) -> Output:
        request = self._request
        while True:
            if request.error is not None:
                raise request.error
            output = request.assembler.take()
            if output is not None:
                return cast(Output, output)
            dead = self._dead()
            if dead is not None:
                raise EngineDeadError(dead)
            request.event = anyio.Event()
            await request.event.wait()

    def _release(self) -> None:
        self._drop(self._request)
