"""Helpers of the unix-socket tests: waiting for an idle engine, speaking the protocol by hand."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import anyio

from deadlines import scaled
from llmkit.remote.framing import FrameReader, pack
from llmkit.types import EngineStats


async def settled(engine: Any, timeout: float = 1.0) -> EngineStats:
    """Wait until ``engine`` (or a client's view of it) runs nothing and has every KV block free."""
    with anyio.fail_after(scaled(timeout)):
        while True:
            s = engine.stats()
            if s.num_running == 0 and s.num_waiting == 0 and s.kv_blocks_free == s.kv_blocks_total:
                return s
            await anyio.sleep(0.01)


async def collect(stream) -> Any:
    last = None
    async for out in stream:
        last = out
    return last


class RawConnection:
    """The protocol spoken by hand; pushed stats messages are skipped unless asked for."""

    def __init__(self, stream):
        self.stream = stream
        self.reader = FrameReader(stream)

    async def send(self, message: dict) -> None:
        await self.stream.send(pack(message))

    async def receive(self, *, stats: bool = False, timeout: float = 5.0) -> dict:
        with anyio.fail_after(scaled(timeout)):
            while True:
                message = await self.reader.receive()
                if stats or message["type"] != "stats":
                    return message

    async def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """Whether the server closes the connection (after any messages still on the way)."""
        with anyio.fail_after(scaled(timeout)):
            try:
                while True:
                    await self.reader.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return True

    async def final(self, rid: str) -> dict:
        """Read until request ``rid`` ends; returns its final (or error) message."""
        while True:
            message = await self.receive()
            if message.get("id") == rid and message["type"] in ("final", "error"):
                return message


def same_outputs(a: Any, b: Any, rel: float = 1e-4) -> bool:
    """Equal outputs, floats (log-probabilities) to within ``rel``: batches of another
    composition round them differently; tokens, texts and reasons must be identical."""
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return all(
            same_outputs(getattr(a, f.name), getattr(b, f.name), rel) for f in dataclasses.fields(a)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_outputs(a[k], b[k], rel) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_outputs(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel, abs_tol=rel)
    return a == b
