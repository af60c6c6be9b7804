"""The benchmarks' workload (random prompts of a few words) and a line naming the machine."""

from __future__ import annotations

import os
import platform
import random
from dataclasses import dataclass

_WORDS = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "river",
    "light",
    "music",
    "story",
    "garden",
    "window",
    "coffee",
    "morning",
    "evening",
    "city",
    "night",
    "model",
    "token",
    "engine",
    "serve",
    "batch",
    "cache",
    "block",
    "request",
)


@dataclass(frozen=True)
class Workload:
    """Prompts of ``input_words`` random words, each asking for ``output_len`` tokens."""

    input_words: int = 24
    output_len: int = 128
    seed: int = 0

    def prompts(self, count: int) -> list[str]:
        rng = random.Random(self.seed)
        return [" ".join(rng.choices(_WORDS, k=self.input_words)) for _ in range(count)]


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
