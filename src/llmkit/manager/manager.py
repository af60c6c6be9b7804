"""ModelManager: many named engines, each loaded on its first request and unloaded when idle.

At most ``max_loaded_models`` are resident, within a memory budget; making room unloads the
least recently used idle model (never one with requests in flight, never a pinned one), and
a request that finds no room waits, up to ``max_waiting`` requests, past which it is refused
as an overloaded engine is (503 with Retry-After over HTTP). State changes happen on the
event loop only; loads run in a worker thread.
"""

from __future__ import annotations

import gc
import logging
import math
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import anyio
from anyio.abc import TaskGroup

from llmkit.engine.protocol import EngineProtocol
from llmkit.errors import EngineOverloadedError
from llmkit.manager.errors import ModelLoadError, ModelNotFoundError
from llmkit.manager.keep_alive import DEFAULT_KEEP_ALIVE_S, parse_keep_alive
from llmkit.manager.lease import Lease
from llmkit.manager.memory import estimate_bytes
from llmkit.manager.room import Budget, room_for
from llmkit.manager.settings import ModelSettings
from llmkit.manager.slot import ModelStatus, Slot
from llmkit.manager.surface import EngineSurface
from llmkit.model.cpu_memory import available_memory

logger = logging.getLogger(__name__)
_GIB = 1 << 30
LoadEngine = Callable[[ModelSettings], EngineProtocol]


def _watch(engine: EngineProtocol) -> Callable[[], object]:
    """Whether ``engine`` still lives, once its holders' references are gone."""
    try:
        return weakref.ref(engine)
    except TypeError:  # no weak references to it: taken as alive
        return lambda: engine


def _async_engines() -> LoadEngine:
    """Loads AsyncEngines, each model's tokenizer built once and kept for its next load."""
    from llmkit.engine.async_engine import AsyncEngine
    from llmkit.engine.core.tokenizers import Tokenizers

    tokenizers = Tokenizers()
    return lambda settings: AsyncEngine(settings.config, tokenizers=tokenizers)


class ModelManager(EngineSurface):
    """Named models behind one object::

        async with ModelManager([ModelSettings.of("chat", "smollm2")]) as models:
            async with await models.acquire("chat") as engine:
                async for out in engine.generate("Hello"):
                    ...

    ``create_app(models)`` serves them all. ``keep_alive_s``: the default seconds a model
    stays loaded after its last request (None: forever); ``memory_bytes``: the budget
    (default: the memory available when the manager is made); ``clock`` and
    ``load_engine`` are for tests. A model's tokenizer is built on its first load and kept
    for the next ones (17 MB for SmolLM2's), which a swap would otherwise wait for.
    """

    def __init__(
        self,
        models: Iterable[ModelSettings],
        *,
        keep_alive_s: float | None = DEFAULT_KEEP_ALIVE_S,
        max_loaded_models: int | None = None,
        memory_bytes: int | None = None,
        max_waiting: int = 256,
        clock: Callable[[], float] = time.monotonic,
        load_engine: LoadEngine | None = None,
    ):
        self._slots: dict[str, Slot] = {}
        for settings in models:
            if settings.name in self._slots:
                raise ValueError(f"model {settings.name!r} is named twice")
            size = settings.resident_bytes
            self._slots[settings.name] = Slot(
                settings, estimate_bytes(settings.config) if size is None else size
            )
        if not self._slots:
            raise ValueError("give at least one model")
        if max_loaded_models is not None and max_loaded_models < 1:
            raise ValueError(f"max_loaded_models must be >= 1, got {max_loaded_models}")
        self.keep_alive_s = keep_alive_s
        self.max_loaded_models = max_loaded_models
        self.memory_bytes = available_memory() if memory_bytes is None else memory_bytes
        self.max_waiting = max_waiting
        self._clock = clock
        self._load_engine = load_engine or _async_engines()
        self._waiting = 0
        self._changed = anyio.Event()
        self._tasks: TaskGroup | None = None

    # ---- lifetime ------------------------------------------------------------------

    async def __aenter__(self) -> ModelManager:
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._tasks.start_soon(self._reap_forever)
        for slot in self._slots.values():
            if slot.settings.pin:
                await self.load(slot.name)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        await self._tasks.__aexit__(None, None, None)
        self._tasks = None
        for slot in self._slots.values():
            if slot.state == "loaded":
                await self._unload(slot, evicted=False)

    # ---- what clients see ----------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return list(self._slots)

    def settings(self, name: str) -> ModelSettings:
        return self._slot(name).settings

    def status(self) -> list[ModelStatus]:
        now = self._clock()
        return [slot.status(now) for slot in self._slots.values()]

    def loaded_engine(self, name: str) -> EngineProtocol | None:
        """The engine of a loaded model, without holding it (for /metrics and probes)."""
        slot = self._slot(name)
        return slot.engine if slot.state == "loaded" else None

    def loaded_engines(self) -> Iterator[EngineProtocol]:
        return (s.engine for s in self._slots.values() if s.engine is not None)

    def default_engine(self) -> EngineProtocol | None:
        return next(iter(self._slots.values())).engine

    def check_admission(self) -> None:
        """EngineOverloadedError when no more requests may wait for a model to load."""
        if self._waiting >= self.max_waiting:
            raise EngineOverloadedError(
                f"{self._waiting} requests are waiting for models to load "
                f"(max {self.max_waiting}); retry later",
                reason="model_wait",
            )

    def is_healthy(self) -> bool:
        """Whether every loaded model's engine runs (an unloaded one is not unhealthy)."""
        return all(e.is_healthy() for s in self._slots.values() if (e := s.engine) is not None)

    # ---- requests ------------------------------------------------------------------

    async def acquire(self, name: str, keep_alive: str | float | None = None) -> Lease:
        """The loaded engine of ``name``, held until the lease and every stream made through
        it end; loads it first (once, however many ask) and makes room if needed.

        ``keep_alive``: this request's (Ollama's syntax); None: the model's or the
        manager's default. ``ModelNotFoundError``, ``ModelLoadError``, ``ValueError`` (a bad
        keep_alive) or ``EngineOverloadedError`` (too many requests waiting for room)."""
        slot = self._slot(name)
        keep = self._keep_alive(slot, keep_alive)
        start = time.perf_counter()
        if slot.state != "loaded":
            await self._wait_loaded(slot)
        assert slot.engine is not None
        slot.in_flight += 1
        slot.unload_requested = False  # a new request outweighs an earlier unload
        now = self._clock()
        slot.last_used = now
        slot.expires_at = None if keep is None else now + keep
        return Lease(slot.engine, lambda: self._release(slot, keep), time.perf_counter() - start)

    async def load(self, name: str, keep_alive: str | float | None = None) -> None:
        """Load ``name`` now (POST /models/load, Ollama's empty request), then keep it as an
        idle model."""
        (await self.acquire(name, keep_alive)).release()

    async def unload(self, name: str) -> bool:
        """Unload ``name`` now if idle, else as soon as its last request ends; False if it
        was not loaded."""
        slot = self._slot(name)
        if slot.state != "loaded":
            return False
        slot.expires_at, slot.unload_requested = self._clock(), True
        if slot.in_flight == 0:
            await self._unload(slot, evicted=False)
        return True

    async def reap_expired(self) -> list[str]:
        """Unload every idle model whose keep-alive has passed; their names."""
        now = self._clock()
        expired = [
            slot
            for slot in self._slots.values()
            if slot.evictable and slot.expires_at is not None and slot.expires_at <= now
        ]
        for slot in expired:
            await self._unload(slot, evicted=False)
        return [slot.name for slot in expired]

    # ---- the rules -----------------------------------------------------------------

    def _slot(self, name: str) -> Slot:
        try:
            return self._slots[name]
        except KeyError:
            raise ModelNotFoundError(name) from None

    def _keep_alive(self, slot: Slot, value: str | float | None) -> float | None:
        if slot.settings.pin:
            return None
        if value is None:
            value = slot.settings.keep_alive
        return self.keep_alive_s if value is None else parse_keep_alive(value)

    def _room(self, slot: Slot) -> list[Slot] | None:
        budget = Budget(self.max_loaded_models, self.memory_bytes)
        return room_for(slot, self._slots.values(), budget)

    async def _wait_loaded(self, slot: Slot) -> None:
        if slot.resident_bytes > self.memory_bytes:
            raise ModelLoadError(
                slot.name,
                f"it needs about {slot.resident_bytes / _GIB:.2f} GiB, more than the models' "
                f"memory budget of {self.memory_bytes / _GIB:.2f} GiB",
            )
        self.check_admission()
        self._waiting += 1
        try:
            while slot.state != "loaded":
                if slot.state == "unloaded" and (victims := self._room(slot)) is not None:
                    await self._load(slot, victims)
                    return
                changed = slot.ready if slot.state == "loading" else self._changed
                assert changed is not None
                await changed.wait()
                if slot.state == "unloaded" and slot.error is not None and changed is slot.ready:
                    raise ModelLoadError(slot.name, slot.error)
        finally:
            self._waiting -= 1

    async def _load(self, slot: Slot, victims: list[Slot]) -> None:
        slot.state, slot.ready, slot.error = "loading", anyio.Event(), None
        ready = slot.ready
        try:
            for victim in victims:
                await self._unload(victim, evicted=True)
            start = time.perf_counter()
            engine = await anyio.to_thread.run_sync(self._load_engine, slot.settings)
            await engine.__aenter__()
        except BaseException as exc:
            # A cancelled load leaves no error: the next request loads it again.
            slot.state = "unloaded"
            if isinstance(exc, Exception):
                slot.error = f"{type(exc).__name__}: {exc}"
                raise ModelLoadError(slot.name, slot.error) from exc
            raise
        else:
            slot.engine, slot.state = engine, "loaded"
            slot.loads += 1
            slot.load_seconds += time.perf_counter() - start
        finally:
            ready.set()
            self._notify()

    async def _unload(self, slot: Slot, *, evicted: bool) -> None:
        engine, slot.engine, slot.state = slot.engine, None, "unloading"
        try:
            if engine is not None:
                await engine.__aexit__(None, None, None)
                alive = _watch(engine)
                del engine  # the last reference: reference counting frees it here
                if alive() is not None:  # in a reference cycle: a collection (~0.2 s) frees it
                    logger.debug("model %s outlived its unload: collecting garbage", slot.name)
                    gc.collect()
        finally:
            slot.state, slot.expires_at, slot.unload_requested = "unloaded", None, False
            slot.evictions += evicted
            self._notify()

    def _release(self, slot: Slot, keep: float | None) -> None:
        slot.in_flight -= 1
        now = self._clock()
        slot.last_used = now
        if not slot.unload_requested:
            slot.expires_at = None if keep is None else now + keep
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _reap_forever(self) -> None:
        while True:
            await self.reap_expired()
            changed = self._changed
            expiries = [
                s.expires_at
                for s in self._slots.values()
                if s.evictable and s.expires_at is not None
            ]
            wait = min(expiries) - self._clock() if expiries else math.inf
            with anyio.move_on_after(max(wait, 0.0)):
                await changed.wait()
