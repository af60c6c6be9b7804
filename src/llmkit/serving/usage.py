"""Token usage of a generation request: prompt and generated tokens, prompt cache hits."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmkit.outputs import RequestOutput
from llmkit.protocol.openai import UsageInfo


@dataclass
class UsageCounter:
    """Counts as outputs arrive; ``details`` adds the prompts' cached tokens to the usage."""

    prompt_tokens: int
    details: bool = False
    completion_tokens: int = 0
    _cached: dict[int, int] = field(default_factory=dict)

    def note_cached(self, prompt_index: int, out: RequestOutput) -> None:
        """The prompt cache hits an engine output of prompt ``prompt_index`` reports."""
        self._cached[prompt_index] = max(self._cached.get(prompt_index, 0), out.num_cached_tokens)

    def info(self) -> UsageInfo:
        cached = sum(self._cached.values()) if self.details else None
        return UsageInfo.of(self.prompt_tokens, self.completion_tokens, cached)
