"""LoRA adapters served by name (vLLM's ``--lora-modules``), loaded and unloaded at runtime."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmkit.lora_request import LoRARequest
from llmkit.serving.errors import OpenAIError, bad_request

if TYPE_CHECKING:
    from llmkit.engine.protocol import EngineProtocol


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
