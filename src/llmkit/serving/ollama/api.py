"""Ollama's generation answers from serving/'s OpenAI ones: message or response chunks, the
final chunk with ``done_reason``, token counts and durations in nanoseconds."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from llmkit.protocol.ollama import ChatResponse, GenerateResponse
from llmkit.protocol.ollama.requests import ToolCall
from llmkit.protocol.ollama.responses import AnswerMessage
from llmkit.protocol.openai import UsageInfo
from llmkit.serving.context import ServingContext
from llmkit.serving.stream import Emit

Kind = Literal["chat", "generate"]


@dataclass
class Timer:
    """A request's clock: from arrival (``load_s`` of it spent loading its model) through
    the first token to the end."""

    load_s: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    first: float | None = None

    def timings(self, reason: str | None, usage: Any) -> dict[str, Any]:
        """Ollama's final fields; ``usage``: OpenAI's (an embedding's has no completion)."""
        end = time.perf_counter()
        # Without a stream's first token, the whole run counts as generation.
        first = self.first or self.start + self.load_s
        ns = lambda s: int(s * 1e9)  # noqa: E731
        return {
            "done_reason": reason,
            "total_duration": ns(end - self.start),
            "load_duration": ns(self.load_s),
            "prompt_eval_count": getattr(usage, "prompt_tokens", 0),
            "prompt_eval_duration": ns(max(first - self.start - self.load_s, 0.0)),
            "eval_count": getattr(usage, "completion_tokens", 0),
            "eval_duration": ns(end - first),
        }


def _tool_calls(calls: list[tuple[str, str]]) -> list[ToolCall] | None:
    """Ollama's tool calls (arguments as an object) from (name, arguments' JSON) pairs."""
    if not calls:
        return None
    return [
        ToolCall.model_validate({"function": {"name": name, "arguments": json.loads(args or "{}")}})
        for name, args in calls
    ]


def _reason(finish: str | None) -> str:
    return "length" if finish == "length" else "stop"


def answer(
    kind: Kind, model: str, text: str, thinking: str | None, calls: Any, **final: Any
) -> BaseModel:
    if kind == "chat":
        message = AnswerMessage(
            content=text, thinking=thinking or None, tool_calls=_tool_calls(calls)
        )
        return ChatResponse(model=model, message=message, **final)
    return GenerateResponse(model=model, response=text, thinking=thinking or None, **final)


async def create(
    ctx: ServingContext,
    job: Any,
    run: Callable[[ServingContext, Any], Awaitable[Any]],
    kind: Kind,
    timer: Timer,
) -> BaseModel:
    """One answer, ``done`` with its counts."""
    result = await run(ctx, job)
    choice = result.choices[0]
    message = getattr(choice, "message", None)
    text = choice.text if message is None else message.content or ""
    thinking = message and message.reasoning_content
    calls = [
        (c.function.name, c.function.arguments) for c in (message and message.tool_calls) or []
    ]
    timings = timer.timings(_reason(choice.finish_reason), result.usage)
    return answer(kind, ctx.model_name, text, thinking, calls, done=True, **timings)


async def stream(
    ctx: ServingContext,
    job: Any,
    run: Callable[[ServingContext, Any, Emit], Awaitable[None]],
    kind: Kind,
    timer: Timer,
    emit: Emit,
) -> None:
    """A chunk per text delta, tool calls whole once complete, then the ``done`` chunk."""
    finish: list[str | None] = [None]
    usage: list[UsageInfo | None] = [None]
    calls: dict[int, Any] = {}

    async def on_chunk(chunk: BaseModel) -> None:
        if getattr(chunk, "usage", None) is not None:
            usage[0] = chunk.usage  # type: ignore[attr-defined]
        for choice in getattr(chunk, "choices", None) or []:
            finish[0] = choice.finish_reason or finish[0]
            delta = getattr(choice, "delta", None)
            text = choice.text if delta is None else delta.content or ""
            thinking = None if delta is None else delta.reasoning_content
            for call in (delta and delta.tool_calls) or []:
                _add_call(calls, call)
            if text or thinking:
                timer.first = timer.first or time.perf_counter()
                await emit(answer(kind, ctx.model_name, text, thinking, [], done=False))

    await run(ctx, job, on_chunk)
    whole = [(c["name"], c["arguments"]) for _, c in sorted(calls.items())]
    timings = timer.timings(_reason(finish[0]), usage[0])
    await emit(answer(kind, ctx.model_name, "", None, whole, done=True, **timings))


def _add_call(calls: dict[int, Any], delta: Any) -> None:
    """OpenAI streams a tool call in pieces (its name, then its arguments' text)."""
    call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
    call["name"] += delta.function.name or ""
    call["arguments"] += delta.function.arguments or ""
