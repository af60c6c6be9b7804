"""/v1/messages (Anthropic's Messages API) over the chat path: the request is checked and
run as a chat completion, and its answer or chunks told as Anthropic's message or events."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from llmkit.protocol.anthropic import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    CountTokensRequest,
    CountTokensResponse,
    InputJsonDelta,
    MessageDelta,
    MessageDeltaEvent,
    MessagesRequest,
    MessagesResponse,
    MessageStart,
    MessageStop,
    MessagesUsage,
    Ping,
    ResponseText,
    ResponseThinking,
    ResponseToolUse,
    TextDelta,
    ThinkingDelta,
)
from llmkit.protocol.openai import ChatCompletionChunk
from llmkit.serving import media
from llmkit.serving.anthropic.convert import chat_request, tokenize_request
from llmkit.serving.context import ServingContext
from llmkit.serving.openai import chat, tokens
from llmkit.serving.stream import Emit


async def prepare_message(
    ctx: ServingContext, req: MessagesRequest, request_id: str
) -> chat.ChatJob:
    """Check everything, render the prompt and start; raises OpenAIError before any answer."""
    request = chat_request(req)
    images = await media.chat_images(ctx, request.messages)
    return await chat.prepare_chat(ctx, request, request_id, images)


async def create_message(ctx: ServingContext, job: chat.ChatJob) -> MessagesResponse:
    """Run to the end and answer with one message."""
    result = await chat.create_chat(ctx, job)
    choice = result.choices[0]
    content: list[ResponseThinking | ResponseText | ResponseToolUse] = []
    thought = choice.message.reasoning or choice.message.reasoning_content
    if thought:
        content.append(ResponseThinking(thinking=thought))
    if choice.message.content:
        content.append(ResponseText(text=choice.message.content))
    content += [
        ResponseToolUse(id=call.id, name=call.function.name, input=_input(call.function.arguments))
        for call in choice.message.tool_calls or []
    ]
    reason, sequence = stop_reason(choice.finish_reason, choice.stop_reason)
    usage = MessagesUsage(
        input_tokens=result.usage.prompt_tokens, output_tokens=result.usage.completion_tokens
    )
    return MessagesResponse(
        id=job.request_id,
        model=job.model,
        content=content,
        stop_reason=reason,
        stop_sequence=sequence,
        usage=usage,
    )


async def stream_message(ctx: ServingContext, job: chat.ChatJob, emit: Emit) -> None:
    """Run, emitting message_start, each content block's start, deltas and stop, then
    message_delta (stop_reason, usage) and message_stop."""
    blocks = _Blocks(emit)
    start = MessagesResponse(
        id=job.request_id,
        model=job.model,
        content=[],
        usage=MessagesUsage(input_tokens=len(job.prompt.token_ids), output_tokens=0),
    )
    await emit(MessageStart(message=start))
    await emit(Ping())
    ending: dict[str, Any] = {"reason": None, "stop": None, "output_tokens": 0}

    async def on_chunk(chunk: BaseModel) -> None:
        assert isinstance(chunk, ChatCompletionChunk)
        if chunk.usage is not None:
            ending["output_tokens"] = chunk.usage.completion_tokens
        for choice in chunk.choices:
            delta = choice.delta
            thought = delta.reasoning or delta.reasoning_content
            if thought:
                await blocks.thinking(thought)
            if delta.content:
                await blocks.text(delta.content)
            for call in delta.tool_calls or []:
                if call.id is not None:
                    await blocks.tool_use(call.id, call.function.name or "")
                if call.function.arguments:
                    await blocks.arguments(call.function.arguments)
            if choice.finish_reason is not None:
                ending["reason"], ending["stop"] = choice.finish_reason, choice.stop_reason

    await chat.stream_chat(ctx, job, on_chunk)
    await blocks.close()
    reason, sequence = stop_reason(ending["reason"], ending["stop"])
    await emit(
        MessageDeltaEvent(
            delta=MessageDelta(stop_reason=reason, stop_sequence=sequence),
            usage=MessagesUsage(
                input_tokens=len(job.prompt.token_ids), output_tokens=ending["output_tokens"]
            ),
        )
    )
    await emit(MessageStop())


async def count_tokens(ctx: ServingContext, req: CountTokensRequest) -> CountTokensResponse:
    """The prompt's tokens as the chat template renders it, tools included."""
    rendered = await tokens.tokenize(ctx, tokenize_request(req))
    return CountTokensResponse(input_tokens=rendered.count)


def stop_reason(finish_reason: str | None, stop: int | str | None) -> tuple[Any, str | None]:
    """Anthropic's ``stop_reason`` and ``stop_sequence`` for the chat finish."""
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason == "tool_calls":
        return "tool_use", None
    if isinstance(stop, str):
        return "stop_sequence", stop
    return ("end_turn" if finish_reason is not None else None), None


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class _Blocks:
    """The content blocks of a streamed message: one open at a time, each started before
    its deltas and stopped before the next starts."""

    def __init__(self, emit: Emit):
        self._emit = emit
        self._index = -1
        self._open: str | None = None  # "thinking", "text" or "tool_use"

    async def thinking(self, text: str) -> None:
        if self._open != "thinking":
            await self._start(ResponseThinking(thinking=""))
        await self._emit(ContentBlockDelta(index=self._index, delta=ThinkingDelta(thinking=text)))

    async def text(self, text: str) -> None:
        if self._open != "text":
            await self._start(ResponseText(text=""))
        await self._emit(ContentBlockDelta(index=self._index, delta=TextDelta(text=text)))

    async def tool_use(self, call_id: str, name: str) -> None:
        await self._start(ResponseToolUse(id=call_id, name=name, input={}))

    async def arguments(self, partial: str) -> None:
        if self._open != "tool_use":
            return  # arguments belong to a call, whose first delta opened its block
        delta = InputJsonDelta(partial_json=partial)
        await self._emit(ContentBlockDelta(index=self._index, delta=delta))

    async def close(self) -> None:
        if self._open is not None:
            await self._emit(ContentBlockStop(index=self._index))
            self._open = None

    async def _start(self, block: ResponseThinking | ResponseText | ResponseToolUse) -> None:
        await self.close()
        self._index += 1
        self._open = block.type
        await self._emit(ContentBlockStart(index=self._index, content_block=block))
