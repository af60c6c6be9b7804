"""What streaming serving functions share: the emit callback and usage on every chunk."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from llmkit.protocol.openai import UsageInfo

# A transport's way to deliver one chunk (an SSE event, a WebSocket message...).
Emit = Callable[[BaseModel], Awaitable[None]]


def usage_kwargs(
    include_usage: bool, continuous: bool, usage: Callable[[], UsageInfo]
) -> dict[str, Any]:
    """A chunk's ``usage``: absent unless asked for; then null, or running totals if continuous."""
    if not include_usage:
        return {}
    return {"usage": usage() if continuous else None}
