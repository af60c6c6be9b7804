"""LoRA adapters served by name (vLLM's ``--lora-modules``), loaded and unloaded at runtime."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmkit.lora_request import LoRARequest
from llmkit.serving.errors import OpenAIError, bad_request

if TYPE_CHECKING:
    from llmkit.engine.protocol import EngineProtocol


def parse_lora_modules(values: Sequence[str]) -> list[LoRARequest]:
    """vLLM's ``--lora-modules`` values, ``NAME=PATH`` or ``{"name": ..., "path": ...}``, as
    LoRARequests with ids 1, 2, ...; a malformed one or a name given twice is a ValueError."""
    loras: dict[str, LoRARequest] = {}
    for value in values:
        if value.lstrip().startswith("{"):
            try:
                spec = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{value!r} is not JSON: {exc}") from None
            name, path = (
                spec.get(key) if isinstance(spec, dict) else None for key in ("name", "path")
            )
        else:
            name, _, path = value.partition("=")
        if not isinstance(name, str) or not isinstance(path, str) or not name or not path:
            raise ValueError(f'{value!r} is not NAME=PATH or {{"name": ..., "path": ...}}')
        if name in loras:
            raise ValueError(f"the name {name!r} is given twice")
        loras[name] = LoRARequest(name, len(loras) + 1, path)
    return list(loras.values())


class ServedLoRAs:
    """The adapter names clients may put in ``model``; each is a LoRARequest for the engine."""

    def __init__(self, modules: Sequence[LoRARequest] = (), runtime_updates: bool = False):
        self.adapters = {lora.name: lora for lora in modules}
        self.runtime_updates = runtime_updates
        self._next_id = max((lora.id for lora in modules), default=0) + 1

    def get(self, name: str) -> LoRARequest | None:
        return self.adapters.get(name)

    async def load(self, engine: EngineProtocol, name: str, path: str, taken: list[str]) -> None:
        """Add adapter ``name`` (a 400 if the name is in use or the adapter cannot serve)."""
        for field, value in (("lora_name", name), ("lora_path", path)):
            if not value:
                raise bad_request(f"{field} must not be empty", field)
        if name in self.adapters or name in taken:
            raise bad_request(f"The lora adapter '{name}' has already been loaded.", "lora_name")
        try:
            lora = LoRARequest(name, self._next_id, path)
            self._next_id += 1
            await engine.add_lora(lora)
        except ValueError as exc:
            raise bad_request(str(exc), "lora_path") from None
        if name in self.adapters:  # loaded by a request that overtook this one
            raise bad_request(f"The lora adapter '{name}' has already been loaded.", "lora_name")
        self.adapters[name] = lora

    async def unload(self, engine: EngineProtocol, name: str) -> None:
        """Remove adapter ``name`` (a 404 if there is none); its running requests finish."""
        lora = self.adapters.pop(name, None)
        if lora is None:
            raise OpenAIError(
                404, f"The lora adapter '{name}' cannot be found.", "lora_name", "model_not_found"
            )
        await engine.remove_lora(lora.id)
