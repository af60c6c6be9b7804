"""A minimal HTTP/1.1 client that POSTs JSON and timestamps each Server-Sent Event.

The serving benchmark runs its clients on the same few cores as the server, so the client
must cost little: this one does no header objects, no line iterators and parses no JSON
but the last event, which is what an efficient client (aiohttp, a browser) costs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio


@dataclass
class StreamTiming:
    """When the request was sent, when each event came, and the last JSON event."""

    start: float
    stamps: list[float]
    last: dict[str, Any] | None


class SSEClient:
    def __init__(self, base_url: str, headers: dict[str, str] | None = None):
        parts = urlsplit(base_url)
        if parts.scheme != "http":
            raise ValueError(f"the benchmark client speaks plain http only, got {base_url}")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.headers = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())

    async def post(self, path: str, body: dict[str, Any]) -> StreamTiming:
        payload = json.dumps(body).encode()
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
            f"{self.headers}Connection: close\r\n\r\n"
        ).encode()
        start = time.perf_counter()
        async with await anyio.connect_tcp(self.host, self.port) as stream:
            await stream.send(head + payload)
            return await _read_events(stream, start)


async def _read_events(stream, start: float) -> StreamTiming:
    buffer = await _receive_until(stream, b"", b"\r\n\r\n")
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    status = head.split(b" ", 2)[1]
    if status != b"200":
        raise RuntimeError(f"HTTP {status.decode()}: {head.decode(errors='replace')}")
    if b"transfer-encoding: chunked" not in head.lower():
        raise RuntimeError("expected a chunked event stream")
    stamps: list[float] = []
    pending = last = b""
    while True:
        # One chunk: "<size in hex>\r\n<data>\r\n"; the last has size 0.
        buffer = await _receive_until(stream, buffer, b"\r\n")
        size_line, buffer = buffer.split(b"\r\n", 1)
        size = int(size_line, 16)
        while len(buffer) < size + 2:
            buffer += await stream.receive()
        data, buffer = buffer[:size], buffer[size + 2 :]
        if size == 0:
            break
        now = time.perf_counter()
        *events, pending = (pending + data).split(b"\n\n")
        for event in events:
            if event != b"data: [DONE]":
                stamps.append(now)
                last = event
    return StreamTiming(start, stamps, json.loads(last[len(b"data: ") :]) if last else None)


async def _receive_until(stream, buffer: bytes, marker: bytes) -> bytes:
    while marker not in buffer:
        buffer += await stream.receive()
    return buffer
