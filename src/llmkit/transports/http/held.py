"""An answer that holds its model (of several) until it has been sent, streamed or not."""

from __future__ import annotations

from typing import TypeAlias

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from llmkit.manager.lease import Lease
from llmkit.transports.http.stream import EventStreamResponse

# Whatever a route returns: a response, an event stream, or either holding its model.
Answer: TypeAlias = "Response | EventStreamResponse | HeldResponse"


class HeldResponse:
    """``response``, sent while ``lease`` keeps its model loaded; released when sent, or
    when the client left first."""

    def __init__(self, response: Answer, lease: Lease):
        self._response = response
        self._lease = lease

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._response(scope, receive, send)
        finally:
            self._lease.release()
