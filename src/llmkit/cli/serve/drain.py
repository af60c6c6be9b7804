"""DrainingServer: uvicorn's server, letting in-flight requests finish on SIGTERM, within a
deadline at which the app ends what still runs itself."""

from __future__ import annotations

import logging
import socket
import time
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from llmkit.cli.serve.listen import listening_url

if TYPE_CHECKING:
    from llmkit.serving.context import ServingContext
    from llmkit.transports.http.middleware import ServerLoad

logger = logging.getLogger("uvicorn.error")

# At the deadline the requests left end themselves within moments; what has not by then
# is stuck, and uvicorn cancels it.
_CLOSE_GRACE_S = 0.5


class DrainingServer(uvicorn.Server):
    """uvicorn's server, draining on the first shutdown signal (SIGTERM, SIGINT).

    The app is marked draining at once: /readyz and /health answer 503 and new model
    requests are refused with 503, while the port stays open and in-flight requests (HTTP
    and WebSocket) go on. When none is left, uvicorn shuts down. When some still run at
    ``timeout_graceful_shutdown`` (``--shutdown-timeout``), the app's closing signal is
    set: each ends itself with the shutdown error (a stream with an error event and
    ``[DONE]``, a WebSocket request with ``error`` and ``done``, any other with a 503), and
    uvicorn shuts down once they have. A second signal exits at once, as uvicorn's does.
    """

    def __init__(self, config: uvicorn.Config, serving: ServingContext, load: ServerLoad):
        super().__init__(config)
        self._serving = serving
        self._load = load
        self._drain_deadline: float | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and sockets:
            # uvicorn says where it listens only when it binds the sockets itself.
            for sock in sockets:
                url = listening_url(sock, self.config.is_ssl)
                logger.info("Uvicorn running on %s (Press CTRL+C to quit)", url)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain_deadline is not None:
            super().handle_exit(sig, frame)  # the second signal: exit now
            return
        self._serving.draining = True
        self._drain_deadline = time.monotonic() + (self.config.timeout_graceful_shutdown or 0)

    async def on_tick(self, counter: int) -> bool:
        if self._drain_deadline is not None and self._drained(self._drain_deadline):
            # Nothing is left for uvicorn to wait for but closing connections: its wait
            # (whole seconds) only bounds a stuck one.
            self.config.timeout_graceful_shutdown = 1
            return True
        return await super().on_tick(counter)

    def _drained(self, deadline: float) -> bool:
        """Whether to shut down now: nothing in flight, or the deadline's grace is over.
        At the deadline the app is told to end what still runs."""
        if self._load.in_flight == 0:
            return True
        now = time.monotonic()
        if now < deadline:
            return False
        closing = self._serving.closing
        if not closing.is_set():
            logger.info("stopping the %d request(s) left at the deadline", self._load.in_flight)
            closing.set()
        return now >= deadline + _CLOSE_GRACE_S
