"""Ollama's ``keep_alive``: a Go duration string or seconds; 0 unloads, negative keeps forever."""

from __future__ import annotations

import re

# Go's time.ParseDuration units, as Ollama parses a keep_alive string with it.
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")

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
        seconds = _parse_duration(value.strip())
    return None if seconds < 0 else seconds


def _parse_duration(text: str) -> float:
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    try:
        # Ollama also takes a bare number of seconds written as a string.
        return sign * float(body)
    except ValueError:
        pass
    total, at = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != at:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    if not body or at != len(body):
        raise ValueError(f"keep_alive: {text!r} is not a duration such as '5m', '1h30m' or '30s'")
    return sign * total
