"""The manager's rules without HTTP or models: fake engines, a fake clock, no sleeps."""

from __future__ import annotations

import gc
import re
import weakref

import anyio
import pytest

from llmkit.config import EngineConfig
from llmkit.errors import EngineOverloadedError
from llmkit.models import (
    ModelLoadError,
    ModelManager,
    ModelNotFoundError,
    ModelSettings,
    parse_keep_alive,
)
from llmkit.protocol.ollama.duration import PATTERN

pytestmark = pytest.mark.anyio
MiB = 1 << 20


class FakeEngine:
    """Just enough of an engine for the manager: it starts, stops and reports health."""

    def __init__(self, name: str):
        self.name = name
        self.running = False

    async def __aenter__(self) -> FakeEngine:
        self.running = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.running = False
        # As a real one, which joins its thread from a worker thread: the worker that loaded
        # it, whose own reference to it lingers a moment after it returned it, is done then.
        await anyio.to_thread.run_sync(lambda: None)

    def is_healthy(self) -> bool:
        return self.running


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Loader:
    """Counts loads per model; a model named in ``broken`` fails to load."""

    def __init__(self, broken: tuple[str, ...] = ()):
        self.loads: list[str] = []
        self.broken = broken

    def __call__(self, settings: ModelSettings) -> FakeEngine:
        self.loads.append(settings.name)
        if settings.name in self.broken:
            raise ValueError("bad magic number")
        return FakeEngine(settings.name)


class CyclicLoader(Loader):
    """Its engines sit in a reference cycle, as a real one whose parts hold each other."""

    def __call__(self, settings: ModelSettings) -> FakeEngine:
        engine = super().__call__(settings)
        engine.itself = engine  # type: ignore[attr-defined]
        return engine


def model(name: str, size_mib: int = 100, **how: object) -> ModelSettings:
    return ModelSettings(name, EngineConfig("demo"), resident_bytes=size_mib * MiB, **how)  # type: ignore[arg-type]


def manager(*models: ModelSettings, loader: Loader, clock: Clock, **how: object) -> ModelManager:
    return ModelManager(models, load_engine=loader, clock=clock, **how)  # type: ignore[arg-type]


def states(m: ModelManager) -> dict[str, str]:
    return {s.name: s.state for s in m.status()}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("300ms", 0.3),
        (30, 30.0),
        ("0", 0.0),
        (0, 0.0),
        ("10", 10.0),
        (-1, None),
        ("-1m", None),
    ],
)
def test_keep_alive_parses_like_ollama(value, seconds) -> None:
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", ["5 minutes", "m5", "", "1x", True])
def test_keep_alive_refuses_what_ollama_refuses(value) -> None:
    with pytest.raises(ValueError, match="keep_alive"):
        parse_keep_alive(value)


@pytest.mark.parametrize(
    "text", ["5m", "1h30m", "1.5s", "300ms", ".5h", "2us", "3µs", "-1m", "+10", "10", "0",
             "5 minutes", "m5", "", "1x", "5m3", "ms", "1e3s"],
)  # fmt: skip
def test_the_schema_and_the_parser_read_one_grammar(text) -> None:
    """What /api/*'s schema admits as keep_alive is what the manager parses, and no more."""
    admitted = re.fullmatch(PATTERN, text) is not None
    try:
        parse_keep_alive(text)
    except ValueError:
        parsed = False
    else:
        parsed = True
    assert admitted == parsed


async def test_two_requests_for_an_unloaded_model_load_it_once() -> None:
    loader, clock = Loader(), Clock()
    m = manager(model("a"), loader=loader, clock=clock)
    leases = []

    async def ask() -> None:
        leases.append(await m.acquire("a"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        tg.start_soon(ask)
    assert loader.loads == ["a"]
    assert leases[0].engine.is_healthy() and states(m) == {"a": "loaded"}
    assert m.status()[0].in_flight == 2
    for lease in leases:
        lease.release()
    assert m.status()[0].in_flight == 0


async def test_keep_alive_expires_on_the_clock() -> None:
    loader, clock = Loader(), Clock()
    m = manager(model("a"), model("b"), loader=loader, clock=clock, keep_alive_s=300)
    async with await m.acquire("a"):
        pass
    async with await m.acquire("b", keep_alive="10m"):
        pass
    clock.now += 299
    assert await m.reap_expired() == []
    assert m.status()[0].expires_in_s == pytest.approx(1.0)
    clock.now += 1
    assert await m.reap_expired() == ["a"]
    clock.now += 300
    assert await m.reap_expired() == ["b"]
    assert states(m) == {"a": "unloaded", "b": "unloaded"}


async def test_keep_alive_zero_unloads_after_the_request_and_negative_keeps_forever() -> None:
    loader, clock = Loader(), Clock()
    m = manager(model("a"), model("b"), loader=loader, clock=clock)
    lease = await m.acquire("a", keep_alive=0)
    assert await m.reap_expired() == []  # in flight: kept while the request runs
    lease.release()
    assert await m.reap_expired() == ["a"]
    async with await m.acquire("b", keep_alive=-1):
        pass
    clock.now += 10**9
    assert await m.reap_expired() == []
    assert m.status()[1].expires_in_s is None


async def test_a_request_in_flight_keeps_its_model_past_its_expiry() -> None:
    loader, clock = Loader(), Clock()
    m = manager(model("a"), loader=loader, clock=clock, keep_alive_s=5)
    lease = await m.acquire("a")
    clock.now += 60
    assert await m.reap_expired() == []
    lease.release()  # the keep-alive runs from the end of the last request
    assert await m.reap_expired() == []
    clock.now += 5
    assert await m.reap_expired() == ["a"]


async def test_max_loaded_models_evicts_the_least_recently_used_idle_model() -> None:
    loader, clock = Loader(), Clock()
    m = manager(model("a"), model("b"), model("c"), loader=loader, clock=clock, max_loaded_models=2)
    for name in ("a", "b"):
        async with await m.acquire(name):
            clock.now += 1
    async with await m.acquire("a"):  # a is now the most recently used
        clock.now += 1
    async with await m.acquire("c"):
        pass
    assert states(m) == {"a": "loaded", "b": "unloaded", "c": "loaded"}
    assert {s.name: s.evictions for s in m.status()} == {"a": 0, "b": 1, "c": 0}


async def test_the_memory_budget_evicts_as_many_as_needed() -> None:
    loader, clock = Loader(), Clock()
    m = manager(
        model("a", 300), model("b", 300), model("big", 800),
        loader=loader, clock=clock, memory_bytes=1000 * MiB,
    )  # fmt: skip
    for name in ("a", "b"):
        async with await m.acquire(name):
            clock.now += 1
    async with await m.acquire("big"):
        pass
    assert states(m) == {"a": "unloaded", "b": "unloaded", "big": "loaded"}


async def test_a_model_larger_than_the_budget_fails_with_its_size() -> None:
    m = manager(model("huge", 2048), loader=Loader(), clock=Clock(), memory_bytes=1 << 30)
    with pytest.raises(ModelLoadError, match=r"'huge'.*2\.00 GiB.*1\.00 GiB"):
        await m.acquire("huge")


async def test_a_busy_model_is_never_evicted_and_the_request_waits_for_it() -> None:
    loader, clock = Loader(), Clock()
    m = manager(model("a"), model("b"), loader=loader, clock=clock, max_loaded_models=1)
    busy = await m.acquire("a")
    got_b = anyio.Event()

    async def ask_b() -> None:
        async with await m.acquire("b"):
            got_b.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask_b)
        await anyio.wait_all_tasks_blocked()
        assert not got_b.is_set() and states(m) == {"a": "loaded", "b": "unloaded"}
        busy.release()
    assert got_b.is_set() and states(m) == {"a": "unloaded", "b": "loaded"}


async def test_pinned_models_stay_and_waiters_past_the_bound_are_refused() -> None:
    loader, clock = Loader(), Clock()
    m = manager(
        model("pinned", pin=True), model("b"), loader=loader, clock=clock,
        max_loaded_models=1, max_waiting=1,
    )  # fmt: skip
    async with m:
        assert states(m)["pinned"] == "loaded"  # a pinned model loads with the manager
        clock.now += 10**6
        assert await m.reap_expired() == []
        async with anyio.create_task_group() as tg:
            tg.start_soon(m.acquire, "b")
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(EngineOverloadedError) as refused:
                await m.acquire("b")
            assert refused.value.reason == "model_wait"
            tg.cancel_scope.cancel()
    assert states(m) == {"pinned": "unloaded", "b": "unloaded"}


async def test_a_broken_model_fails_its_own_requests_only() -> None:
    loader, clock = Loader(broken=("bad",)), Clock()
    m = manager(model("good"), model("bad"), loader=loader, clock=clock)
    with pytest.raises(ModelLoadError, match="'bad' failed to load: ValueError: bad magic"):
        await m.acquire("bad")
    async with await m.acquire("good") as engine:
        assert engine.is_healthy()
    assert m.status()[1].error == "ValueError: bad magic number"
    with pytest.raises(ModelLoadError):  # each new request tries again
        await m.acquire("bad")
    assert loader.loads.count("bad") == 2
    with pytest.raises(ModelNotFoundError):
        await m.acquire("missing")


async def test_unload_waits_for_the_last_request() -> None:
    loader, clock = Loader(), Clock()
    m = manager(model("a"), loader=loader, clock=clock)
    lease = await m.acquire("a")
    assert await m.unload("a")
    assert states(m) == {"a": "loaded"}
    lease.release()
    assert await m.reap_expired() == ["a"]
    assert not await m.unload("a")


@pytest.mark.parametrize("cyclic", [False, True], ids=["acyclic", "cyclic"])
async def test_an_unloaded_engine_is_freed_and_collected_only_in_a_cycle(cyclic) -> None:
    m = manager(model("a"), loader=CyclicLoader() if cyclic else Loader(), clock=Clock())
    await m.load("a")
    engine = weakref.ref(m.loaded_engine("a"))
    collections: list[str] = []
    count = lambda phase, info: collections.append(phase)  # noqa: E731
    enabled = gc.isenabled()
    gc.disable()  # only what the manager does frees it
    gc.callbacks.append(count)
    try:
        assert await m.unload("a")
        assert engine() is None
    finally:
        gc.callbacks.remove(count)
        if enabled:
            gc.enable()
    # A collection costs a server a third of a second: only a cycle needs one.
    assert collections == (["start", "stop"] if cyclic else [])
