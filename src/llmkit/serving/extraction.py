"""Reasoning and tool calls out of a choice's text, between the engine and ``emit``.

Reasoning comes off first; the tool parser reads only what is left, so a call inside
the reasoning is not a call. Every transport gets the same chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from llmkit.protocol.openai import (
    ChatToolCall,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    FunctionCall,
)
from llmkit.reasoning import ReasoningParser, ReasoningStream
from llmkit.serving.errors import OpenAIError
from llmkit.tools import ToolCallStream, ToolParser, extract_tool_calls

logger = logging.getLogger("llmkit.serving")


@dataclass(frozen=True)
class Extracted:
    """A whole choice's message parts."""

    content: str | None
    reasoning: str | None
    tool_calls: list[ChatToolCall] | None


@dataclass
class Extractor:
    """One choice's parsers; ``tools`` may be None (reasoning only), and so ``reasoning``.
    ``names``: the plugin names of the two, for the error when one fails."""

    reasoning: ReasoningParser | None
    tools: ToolParser | None
    max_calls: int | None = None
    names: tuple[str | None, str | None] = (None, None)
    _reasoning_stream: ReasoningStream | None = field(init=False, default=None)
    _tool_stream: ToolCallStream | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.reasoning is not None:
            self._reasoning_stream = ReasoningStream(self.reasoning)
        if self.tools is not None:
            self._tool_stream = ToolCallStream(self.tools, self.max_calls)

    def whole(self, text: str) -> Extracted:
        reasoning = None
        if self.reasoning is not None:
            with self._failing("reasoning", self.reasoning):
                reasoning, text = self.reasoning.split(text, final=True)
        calls = None
        if self.tools is not None:
            with self._failing("tool", self.tools):
                text, found = extract_tool_calls(self.tools, text, self.max_calls)
            calls = [
                ChatToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
                for c in found
            ] or None
        return Extracted(text or (None if calls else ""), reasoning or None, calls)

    def feed(self, delta: str, final: bool) -> DeltaMessage | None:
        """The delta message for a text delta (``final``: the choice is done); None if the
        delta brings nothing yet."""
        reasoning = ""
        if self._reasoning_stream is not None:
            with self._failing("reasoning", self._reasoning_stream.parser):
                reasoning, delta = self._reasoning_stream.feed(delta, final)
        calls: list[DeltaToolCall] = []
        if self._tool_stream is not None:
            with self._failing("tool", self._tool_stream.parser):
                delta, found = self._tool_stream.feed(delta, final)
            calls = [
                DeltaToolCall(
                    index=d.index,
                    id=d.id,
                    type="function",
                    function=DeltaFunctionCall(name=d.name, arguments=d.arguments),
                )
                if d.id
                else DeltaToolCall(index=d.index, function=DeltaFunctionCall(arguments=d.arguments))
                for d in found
            ]
        fields: dict[str, object] = {}
        if delta:
            fields["content"] = delta
        if reasoning:
            fields["reasoning_content"] = reasoning
        if calls:
            fields["tool_calls"] = calls
        return DeltaMessage(**fields) if fields else None  # type: ignore[arg-type]

    @property
    def called(self) -> bool:
        """Whether a streamed call was sent."""
        return self._tool_stream is not None and bool(self._tool_stream.calls)

    @contextmanager
    def _failing(self, kind: str, parser: object) -> Iterator[None]:
        """A parser that raises fails this response alone, with an error naming it."""
        try:
            yield
        except Exception as exc:
            name = self.names[0 if kind == "reasoning" else 1]
            cls = type(parser)
            which = f"{kind} parser plugin {name!r}" if name else f"built-in {kind} parser"
            logger.exception("the %s (%s.%s) failed", which, cls.__module__, cls.__qualname__)
            raise OpenAIError(
                500,
                f"the {which} ({cls.__module__}.{cls.__qualname__}) failed on this response: "
                f"{type(exc).__name__}: {exc}",
                code="plugin_error",
            ) from None
