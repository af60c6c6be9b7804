"""The engine's watchdog: a step loop that holds requests but completes no step is stalled."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


class Watchdog:
    """Times the step loop's progress; :meth:`stalled_for` is what health checks read.

    The loop calls :meth:`progress` after each step and each time it wakes to work; a
    thread of its own logs each stall once when it starts and once when it ends.
    """

    def __init__(self, held_requests: Callable[[], int], timeout_s: float):
        self._held = held_requests
        self._timeout_s = timeout_s
        self._progress_at = time.monotonic()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def progress(self) -> None:
        self._progress_at = time.monotonic()

    def stalled_for(self) -> float | None:
        """Seconds the loop has held requests without progress, once past the timeout."""
        idle = time.monotonic() - self._progress_at
        return idle if self._held() and idle > self._timeout_s else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="llmkit-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop, and return once the watching thread has ended: it holds what ``held_requests``
        reads (the engine's core, and so its model), which a stopped engine must let go of."""
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _watch(self) -> None:
        stalled = False
        while not self._stopped.wait(min(self._timeout_s / 4, 5.0)):
            idle = self.stalled_for()
            if idle is not None and not stalled:
                logger.error(
                    "engine stalled: it holds %d requests but has completed no step for %.1f s "
                    "(watchdog_timeout_s=%g); reporting unhealthy",
                    self._held(),
                    idle,
                    self._timeout_s,
                )
            elif idle is None and stalled:
                logger.warning("engine recovered: steps are completing again")
            stalled = idle is not None
