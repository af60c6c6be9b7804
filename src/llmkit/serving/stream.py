"""What streaming serving functions share: the emit callback and the stream options."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from llmkit.protocol.openai import SamplingFields, UsageInfo
from llmkit.serving.errors import bad_request

# A transport's way to deliver one chunk (an SSE event, a WebSocket message...).
Emit = Callable[[BaseModel], Awaitable[None]]


@dataclass(frozen=True)
class StreamSettings:
    """Whether a request streams, and where its usage goes (``stream_options``)."""

    stream: bool
    include_usage: bool = False
    continuous_usage: bool = False

    @classmethod
    def of(cls, req: SamplingFields, force_usage: bool = False) -> StreamSettings:
        """``force_usage``: a stream ends with usage even when the request did not ask."""
        options = req.stream_options
        if options is not None and not req.stream:
            raise bad_request(
                "stream_options can only be set when stream is true", "stream_options"
            )
        include = bool(options and options.include_usage) or (force_usage and req.stream)
        return cls(
            req.stream, include, bool(include and options and options.continuous_usage_stats)
        )

    def chunk_usage(self, usage: Callable[[], UsageInfo]) -> dict[str, Any]:
        """A chunk's ``usage``: absent unless asked for; then null, or running totals if
        continuous."""
        if not self.include_usage:
            return {}
        return {"usage": usage() if self.continuous_usage else None}
