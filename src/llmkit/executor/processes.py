"""WorkerProcesses: the tensor-parallel ranks 1..size-1 as child processes; starts and stops them,
and tells when one is lost."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import time
import weakref

import torch.distributed as dist

from llmkit.config import EngineConfig
from llmkit.errors import EngineDeadError
from llmkit.executor.group import open_store
from llmkit.executor.worker import WorkerArgs

logger = logging.getLogger(__name__)

_STOP_WAIT_S = 5.0


class WorkerProcesses:
    """Ranks 1..size-1 as child processes: fresh interpreters (``python -m``), so neither
    this process's threads and CUDA state nor the app's ``__main__`` are carried over."""

    def __init__(self, config: EngineConfig, model_path: str, max_model_len: int):
        size = config.tensor_parallel_size
        self.store: dist.TCPStore = open_store(size)
        self.procs: list[subprocess.Popen[bytes]] = []
        for rank in range(1, size):
            args = WorkerArgs(config, model_path, max_model_len, rank, self.store.port)
            proc = subprocess.Popen(
                [sys.executable, "-m", "llmkit.executor.worker"], stdin=subprocess.PIPE
            )
            assert proc.stdin is not None
            with proc.stdin:
                proc.stdin.write(pickle.dumps(args))
            self.procs.append(proc)
        # Ends them even when nobody calls stop() (an engine dropped without shutdown).
        self._finalizer = weakref.finalize(self, _stop, self.procs, 0.0)

    def wait_ready(self) -> None:
        """Block until every worker reached the store; ``EngineDeadError`` if one died first."""
        keys = [f"ready/{p + 1}" for p in range(len(self.procs))]
        while not self.store.check(keys):
            self.check_alive()
            time.sleep(0.05)

    def check_alive(self) -> None:
        for rank, proc in enumerate(self.procs, start=1):
            if proc.poll() is not None:
                raise EngineDeadError(
                    f"tensor-parallel worker {rank} exited with code {proc.returncode}"
                )

    def lost(self, cause: BaseException) -> EngineDeadError:
        """What to raise after a collective failed: a dead worker's exit, else ``cause``."""
        deadline = time.monotonic() + 1.0  # a killed peer's exit can lag its closed socket
        while time.monotonic() < deadline:
            try:
                self.check_alive()
            except EngineDeadError as exc:
                return exc
            time.sleep(0.02)
        return EngineDeadError(f"the tensor-parallel group failed: {cause!r}")

    def stop(self, wait_s: float = _STOP_WAIT_S) -> None:
        """Give the workers ``wait_s`` to exit (after STOP), then kill those still running."""
        if self._finalizer.detach() is not None:
            _stop(self.procs, wait_s)


def _stop(procs: list[subprocess.Popen[bytes]], wait_s: float) -> None:
    """Give the workers ``wait_s`` to exit, then kill the rest: none outlives the engine."""
    deadline = time.monotonic() + wait_s
    for rank, proc in enumerate(procs, start=1):
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            if wait_s:
                logger.warning("tensor-parallel worker %d did not stop; killing it", rank)
            proc.kill()
            proc.wait()
