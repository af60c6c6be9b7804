"""An engine served on a real unix socket in the test's process; raw protocol connections to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from unix_helpers import RawConnection

from llmkit import AsyncEngine, EngineConfig
from llmkit.remote.unix.protocol import hello_request
from llmkit.unix import EngineClient, serve_unix


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def engine(tiny_model) -> Iterator[AsyncEngine]:
    """One engine for the module; without prefix caching, so a repeated request reports the same."""
    engine = AsyncEngine(EngineConfig(tiny_model, max_model_len=512, enable_prefix_caching=False))
    engine.start()  # a thread: not tied to any test's event loop
    yield engine
    anyio.run(engine.shutdown)


@pytest.fixture
async def socket_path(engine, tmp_path) -> AsyncIterator[Path]:
    """``engine`` served on a socket for the test."""
    path = tmp_path / "engine.sock"
    async with serve_unix(engine, path):
        yield path


@pytest.fixture
async def remote(socket_path) -> AsyncIterator[EngineClient]:
    async with EngineClient(socket_path) as client:
        yield client


@pytest.fixture
async def raw(socket_path) -> AsyncIterator[Any]:
    """``raw(hello=True)``: a new connection speaking the protocol by hand."""
    connections = []

    async def connect(hello: bool = True) -> RawConnection:
        conn = RawConnection(await anyio.connect_unix(socket_path))
        connections.append(conn)
        if hello:
            await conn.send(hello_request())
            assert (await conn.receive())["type"] == "hello"
        return conn

    yield connect
    for conn in connections:
        await conn.stream.aclose()
