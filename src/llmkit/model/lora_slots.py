"""Which LoRA adapter sits in which of the model's slots; the least recently used goes first."""

from __future__ import annotations

from collections import OrderedDict

from llmkit.errors import InternalError


class SlotTable:
    """Adapter ids -> slots ``0..size-1``. No torch: the weights move where it says."""

    def __init__(self, size: int):
        self.size = size
        self._slots: OrderedDict[int, int] = OrderedDict()  # least recently used first
        self._free = list(range(size - 1, -1, -1))

    def assign(self, lora_ids: list[int]) -> dict[int, int]:
        """A slot for each of ``lora_ids``, evicting adapters this step does not use.

        The scheduler never puts more distinct adapters in one step than there are slots.
        """
        wanted = dict.fromkeys(lora_ids)
        if len(wanted) > self.size:
            raise InternalError(f"{len(wanted)} adapters in one step, but only {self.size} slots")
        for lora_id in wanted:
            if lora_id in self._slots:
                self._slots.move_to_end(lora_id)
        for lora_id in wanted:
            if lora_id not in self._slots:
                if self._free:
                    slot = self._free.pop()
                else:
                    victim = next(i for i in self._slots if i not in wanted)
                    slot = self._slots.pop(victim)
                self._slots[lora_id] = slot
        return {lora_id: self._slots[lora_id] for lora_id in wanted}
