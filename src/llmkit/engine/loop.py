"""Calling back into the current event loop from any thread, under asyncio or trio."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


def threadsafe_scheduler() -> Callable[[Callable[[], None]], object]:
    """A function that runs a callback soon on the current event loop, from any thread."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:  # not asyncio: anyio's other backend is trio
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
