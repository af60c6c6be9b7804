"""LoRARequest: which LoRA adapter a request runs with (vLLM's ``LoRARequest``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoRARequest:
    """A PEFT adapter folder (``adapter_config.json`` + ``adapter_model.safetensors``).

    ``id`` (1 or more) names the adapter inside the engine: requests with the same id share
    its weights and its prefix-cache entries, so one id must always mean one adapter.
    """

    name: str
    id: int
    path: str

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("LoRARequest name must not be empty")
        if not isinstance(self.id, int) or isinstance(self.id, bool) or self.id < 1:
            raise ValueError(f"LoRARequest id must be an integer >= 1, got {self.id!r}")
        if not self.path:
            raise ValueError("LoRARequest path must name the adapter's folder")
