"""One named model's place in the manager: its state, engine, requests in flight, expiry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import anyio

from llmkit.engine.protocol import EngineProtocol
from llmkit.manager.settings import ModelSettings

State = Literal["unloaded", "loading", "loaded", "unloading"]


@dataclass(frozen=True)
class ModelStatus:
    """A snapshot of one model, for /v1/models, /api/ps and /metrics."""

    name: str
    model: str  # what it loads: a directory, a GGUF file, "smollm2"
    state: State
    pinned: bool
    resident_bytes: int  # estimated before loading; counted against the budget while loaded
    in_flight: int
    expires_in_s: float | None  # while loaded and idle: seconds until it unloads; None: never
    error: str | None  # why its last load failed
    loads: int
    load_seconds: float
    evictions: int


@dataclass(eq=False)
class Slot:
    settings: ModelSettings
    resident_bytes: int
    state: State = "unloaded"
    engine: EngineProtocol | None = None
    in_flight: int = 0
    last_used: float = float("-inf")
    expires_at: float | None = None  # on the manager's clock; None: never
    error: str | None = None
    unload_requested: bool = False  # POST /models/unload while requests ran: unload when idle
    # Set when a load ends, loaded or failed; a new one per load.
    ready: anyio.Event | None = None
    loads: int = 0
    load_seconds: float = 0.0
    evictions: int = 0

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def occupies(self) -> bool:
        """Whether it counts against max_loaded_models and the memory budget now."""
        return self.state != "unloaded"

    @property
    def evictable(self) -> bool:
        return self.state == "loaded" and self.in_flight == 0 and not self.settings.pin

    def status(self, now: float) -> ModelStatus:
        expires = None
        if self.state == "loaded" and self.expires_at is not None:
            expires = max(self.expires_at - now, 0.0)
        return ModelStatus(
            name=self.name,
            model=self.settings.config.model,
            state=self.state,
            pinned=self.settings.pin,
            resident_bytes=self.resident_bytes,
            in_flight=self.in_flight,
            expires_in_s=expires,
            error=self.error,
            loads=self.loads,
            load_seconds=self.load_seconds,
            evictions=self.evictions,
        )
