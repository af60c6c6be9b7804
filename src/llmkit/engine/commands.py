"""The core thread's inbox: commands from any thread, run between steps."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmkit.engine.core.engine_core import EngineCore

logger = logging.getLogger(__name__)

# A command runs on the core thread; what it returns is ignored.
Command = Callable[["EngineCore"], object]


class CommandQueue:
    """Thread-safe; ``submit`` wakes the core thread when it sleeps in :meth:`wait`."""

    def __init__(self) -> None:
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._wakeup = threading.Event()

    def submit(self, command: Command) -> None:
        self._commands.put(command)
        self._wakeup.set()

    def wait(self) -> None:
        """Sleep until a command is submitted (at once if one came since the last wait)."""
        self._wakeup.wait()
        self._wakeup.clear()

    def run_all(self, core: EngineCore) -> bool:
        """Run every queued command, logging any that fails; returns whether there were any."""
        ran = False
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return ran
            ran = True
            try:
                command(core)
            except Exception:
                logger.exception("engine command failed")
