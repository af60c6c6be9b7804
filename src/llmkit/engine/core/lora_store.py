"""The LoRA adapters requests name, read from disk and checked once, on the caller's side."""

from __future__ import annotations

import threading

from llmkit.lora_request import LoRARequest
from llmkit.model.lora_adapter import LoRAAdapter, LoRALayout, load_adapter


class LoRAStore:
    """Adapters by id. Thread-safe: callers add, the core thread reads what requests carry."""

    def __init__(self, layout: LoRALayout | None):
        self._layout = layout  # None: the engine was started without enable_lora
        self._adapters: dict[int, LoRAAdapter] = {}
        self._lock = threading.Lock()

    def get(self, request: LoRARequest) -> LoRAAdapter:
        """The adapter ``request`` names, loaded on first use; ValueError if it cannot serve."""
        if self._layout is None:
            raise ValueError(
                f"lora_request names adapter {request.name!r}, but the engine was started "
                "without LoRA: start it with enable_lora=True (llmkit serve --enable-lora)"
            )
        with self._lock:
            adapter = self._adapters.get(request.id)
        if adapter is None:
            # Outside the lock: reading a large adapter must not hold up other requests.
            adapter = load_adapter(request, self._layout)
            with self._lock:
                adapter = self._adapters.setdefault(request.id, adapter)
        if adapter.request != request:
            raise ValueError(
                f"lora_request id {request.id} is already adapter {adapter.request.name!r} from "
                f"{adapter.request.path}; one id names one adapter"
            )
        return adapter

    def remove(self, lora_id: int) -> bool:
        """Forget an adapter; requests that already carry it finish with it."""
        with self._lock:
            return self._adapters.pop(lora_id, None) is not None
