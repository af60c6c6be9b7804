"""Admission over the unix socket: a full engine answers with an ``overloaded`` error message,
and EngineClient refuses by the queue the engine reports, before tokenizing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from unix_helpers import RawConnection, collect, settled

from deadlines import scaled
from llmkit import AsyncEngine, EngineConfig, EngineOverloadedError, SamplingParams
from llmkit.remote.unix.data import params_to_wire
from llmkit.remote.unix.protocol import hello_request
from llmkit.unix import EngineClient, serve_unix

pytestmark = pytest.mark.anyio

SHORT = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
LONG = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def full_engine(tiny_model) -> Iterator[AsyncEngine]:
    """One sequence at a time, one more waiting: a second waiting request is refused."""
    config = EngineConfig(tiny_model, max_model_len=512, max_num_seqs=1, max_queued_requests=1)
    engine = AsyncEngine(config)
    engine.start()
    yield engine
    anyio.run(engine.shutdown)


@pytest.fixture
async def path(full_engine, tmp_path) -> AsyncIterator[Path]:
    path = tmp_path / "engine.sock"
    async with serve_unix(full_engine, path):
        yield path


def _generate(rid: str, params: SamplingParams) -> dict:
    return {"type": "generate", "id": rid, "prompt": "Hi", "params": params_to_wire(params)}


async def test_the_engine_refuses_with_an_overloaded_error_message(full_engine, path):
    conn = RawConnection(await anyio.connect_unix(path))
    await conn.send(hello_request())
    assert (await conn.receive())["type"] == "hello"
    await conn.send(_generate("running", LONG))
    assert (await conn.receive())["id"] == "running"  # it runs: the queue is empty again
    await conn.send(_generate("waiting", SHORT))
    await conn.send(_generate("refused", SHORT))
    error = await conn.final("refused")
    assert error["type"] == "error"
    assert error["error"]["code"] == "overloaded"
    assert error["error"]["type"] == "service_unavailable"
    assert error["error"]["reason"] == "queued_requests"
    assert error["error"]["retry_after_ms"] > 0
    await conn.stream.aclose()
    await settled(full_engine, timeout=10)


async def test_engine_client_refuses_by_the_reported_queue_before_tokenizing(full_engine, path):
    async with EngineClient(path) as client:
        running = client.generate("Hi", LONG)
        await running.__anext__()
        waiting = client.generate("Hi", SHORT)
        with anyio.fail_after(scaled(5)):  # the engine pushes its stats when they change
            while client.stats().num_queued < 1:
                await anyio.sleep(0.01)

        def no_tokenizing(*args, **kwargs):
            raise AssertionError("a refused request was tokenized")

        client._processor.prepare = no_tokenizing  # type: ignore[union-attr,method-assign]
        with pytest.raises(EngineOverloadedError) as refused:
            client.generate("Hi", SHORT)
        assert refused.value.reason == "queued_requests"
        with pytest.raises(EngineOverloadedError):
            client.chat([{"role": "user", "content": "Hi"}], SHORT)
        del client._processor.prepare  # type: ignore[union-attr]
        await running.aclose()
        assert len((await collect(waiting)).outputs[0].token_ids) == 4
    await settled(full_engine, timeout=10)
