"""Ollama's ``keep_alive``: a Go duration string or seconds; 0 unloads, negative keeps forever."""

from __future__ import annotations

from llmkit.protocol.ollama.duration import parse_duration

DEFAULT_KEEP_ALIVE_S = 300.0


def parse_keep_alive(value: str | float | int | None) -> float | None:
    """Seconds a model stays loaded after its last request (None: forever), from a Go
    duration (``"5m"``, ``"1h30m"``, ``"-1s"``) or a number of seconds; ``ValueError`` naming
    ``keep_alive`` for anything else."""
    if value is None:
        raise ValueError("keep_alive: give a duration such as '5m' or a number of seconds")
    if isinstance(value, bool):
        raise ValueError(f"keep_alive: expected a duration or seconds, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        seconds = parse_duration(value)
    return None if seconds < 0 else seconds
