"""Reasoning and tool calls out of a choice's text, between the engine and ``emit``.

Reasoning comes off first; the tool parser reads what is left, and the reasoning too where
the parser says a call written while reasoning is still a call (``calls_in_reasoning``):
those calls come first, as the model wrote them first. Every transport gets the same chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from llmkit.protocol.openai import (
    ChatToolCall,
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    FunctionCall,
)
from llmkit.reasoning import ReasoningParser, ReasoningStream
from llmkit.serving.errors import OpenAIError
from llmkit.tools import (
    ToolCall,
    ToolCallDelta,
    ToolCallStream,
    ToolParser,
    extract_tool_calls,
)

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
    # The delta fields the reasoning goes in (ServingOptions.reasoning_fields).
    reasoning_fields: tuple[str, ...] = ("reasoning", "reasoning_content")
    _reasoning_stream: ReasoningStream | None = field(init=False, default=None)
    _tool_stream: ToolCallStream | None = field(init=False, default=None)
    # The calls in the reasoning, while the tool parser reads them there.
    _thought_calls: ToolCallStream | None = field(init=False, default=None)
    _thinking: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        if self.reasoning is not None:
            self._reasoning_stream = ReasoningStream(self.reasoning)
        if self.tools is not None:
            self._tool_stream = ToolCallStream(self.tools, self.max_calls)
            if self.reasoning is not None and self.tools.calls_in_reasoning:
                self._thought_calls = ToolCallStream(self.tools, self.max_calls)

    def whole(self, text: str) -> Extracted:
        reasoning = None
        if self.reasoning is not None:
            with self._failing("reasoning", self.reasoning):
                reasoning, text = self.reasoning.split(text, final=True)
        calls = None
        if self.tools is not None:
            found: list[ToolCall] = []
            with self._failing("tool", self.tools):
                if reasoning and self._thought_calls is not None:
                    reasoning, found = extract_tool_calls(self.tools, reasoning, self.max_calls)
                text, more = extract_tool_calls(self.tools, text, self.max_calls)
            found = (found + more)[: self.max_calls]
            calls = [
                ChatToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
                for c in found
            ] or None
        return Extracted(text or (None if calls else ""), reasoning or None, calls)

    def finish_reason(self, reason: str | None) -> str | None:
        """The choice's finish reason: ``"tool_calls"`` for a stop after a streamed call."""
        return "tool_calls" if reason == "stop" and self.called else reason

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
                reasoning, found = self._calls_in_thought(reasoning, final or bool(delta))
                delta, more = self._tool_stream.feed(delta, final)
            offset = len(self._thought_calls.calls) if self._thought_calls else 0
            found += [replace(d, index=d.index + offset) for d in more]
            if self.max_calls is not None:
                found = [d for d in found if d.index < self.max_calls]
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
            fields |= dict.fromkeys(self.reasoning_fields, reasoning)
        if calls:
            fields["tool_calls"] = calls
        return DeltaMessage(**fields) if fields else None  # type: ignore[arg-type]

    def _calls_in_thought(self, reasoning: str, done: bool) -> tuple[str, list[ToolCallDelta]]:
        """The reasoning delta without call markup, and the calls' deltas; ``done``: the
        reasoning has ended (the answer has begun), so a call cut short there closes."""
        if self._thought_calls is None or not self._thinking:
            return reasoning, []
        self._thinking = not done
        return self._thought_calls.feed(reasoning, done)

    @property
    def called(self) -> bool:
        """Whether a streamed call was sent."""
        streams = (self._tool_stream, self._thought_calls)
        return any(s is not None and s.calls for s in streams)

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
