"""Deadlines for the suite's waits that grow with the machine's load.

A CI runner shares its cores: beside a compiler on every core, a server takes several
times as long to start. A wait here ends as soon as what it waits for happens; only its
limit scales, re-read at each check as ``base_s * max(1, load average / cores)``, so a
machine that turns busy mid-wait extends it. A wait that runs out says what it waited for.
"""

from __future__ import annotations

import os
import time


def load_factor() -> float:
    """How many times over this process's cores the machine's last-minute load is (>= 1)."""
    cores = len(os.sched_getaffinity(0)) or 1
    return max(1.0, os.getloadavg()[0] / cores)


def scaled(base_s: float) -> float:
    """``base_s`` on a quiet machine, more on a busy one (for one-shot timeouts)."""
    return base_s * load_factor()


class Deadline:
    """``base_s`` seconds from now on a quiet machine, for a wait on ``what``."""

    def __init__(self, base_s: float, what: str):
        self.base_s = base_s
        self.what = what
        self.start = time.monotonic()

    def passed(self) -> bool:
        return time.monotonic() - self.start > scaled(self.base_s)

    def error(self, detail: str = "") -> TimeoutError:
        """The failure to raise once it passed: what was awaited, for how long, and why."""
        waited = time.monotonic() - self.start
        message = (
            f"waited {waited:.0f} s for {self.what} (limit {self.base_s:g} s x load "
            f"{load_factor():.1f})"
        )
        return TimeoutError(f"{message}{': ' + detail if detail else ''}")
