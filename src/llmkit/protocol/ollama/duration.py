"""Go's duration syntax, as Ollama reads ``keep_alive`` with ``time.ParseDuration``: the one
grammar the request schema validates and the model manager parses."""

from __future__ import annotations

import re

# Go's units in seconds.
UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
# Longest first, so that "ms" is not read as "m" then "s".
_UNIT = "|".join(sorted(UNITS, key=len, reverse=True))
_PART = re.compile(rf"({_NUMBER})({_UNIT})")
# A duration ("5m", "1h30m", "-1s") or a bare number of seconds, as a JSON schema pattern.
PATTERN = rf"^[+-]?(?:(?:{_NUMBER}(?:{_UNIT}))+|{_NUMBER})$"


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a Go duration or a number of seconds (Ollama takes both as a
    string); ``ValueError`` naming ``keep_alive`` for anything else."""
    text = text.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    try:
        return sign * float(body)
    except ValueError:
        pass
    total, at = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != at:
            break
        total += float(match.group(1)) * UNITS[match.group(2)]
        at = match.end()
    if not body or at != len(body):
        raise ValueError(f"keep_alive: {text!r} is not a duration such as '5m', '1h30m' or '30s'")
    return sign * total
