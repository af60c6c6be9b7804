"""create_engine: one choice of where the served engine runs, for the CLI and for apps."""

from __future__ import annotations

import pytest

from llmkit import AsyncEngine, EngineConfig, SamplingParams, create_engine
from llmkit.unix import EngineClient, serve_unix

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_config_gives_an_engine_here_and_a_socket_reaches_it(tiny_model, tmp_path):
    engine = create_engine(EngineConfig(tiny_model))
    assert isinstance(engine, AsyncEngine)
    path = tmp_path / "engine.sock"
    async with engine, serve_unix(engine, path):
        client = create_engine(engine_socket=path)
        assert isinstance(client, EngineClient)
        async with client:
            params = SamplingParams(max_tokens=2, temperature=0)
            outputs = [out async for out in client.generate("hello", params)]
    assert outputs[-1].finished


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "needs an EngineConfig"),
        ({"config": EngineConfig("demo"), "engine_socket": "/tmp/x"}, "give no config"),
        ({"engine_socket": "/tmp/x", "data_parallel_size": 2}, "give no config"),
        ({"config": EngineConfig("demo"), "data_parallel_size": 0}, "must be >= 1"),
    ],
)
def test_choices_that_do_not_go_together_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        create_engine(**kwargs)
