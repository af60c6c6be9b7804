"""/v1/responses with ``stream: true``: the chat chunks told as the Responses API's events,
each with its ``sequence_number``, in the order the openai client's stream helper reads."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from llmkit.protocol.openai import (
    ChatChoice,
    ChatCompletionChunk,
    ChatCompletionResponse,
    ChatResponseMessage,
    UsageInfo,
)
from llmkit.protocol.openai.responses import (
    OutputFunctionCall,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    OutputText,
    ReasoningText,
    ResponseEvent,
)
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError
from llmkit.serving.openai import chat
from llmkit.serving.openai.responses import ResponsesJob, finish, response_object
from llmkit.serving.stream import Emit


class _Events:
    """Numbers the events and keeps the output items open and done."""

    def __init__(self, emit: Emit, job: ResponsesJob):
        self._emit = emit
        self._job = job
        self.sequence = 0
        self.output: list[OutputItem] = []
        self._open: OutputMessage | OutputFunctionCall | OutputReasoning | None = None

    async def send(self, kind: str, **fields: Any) -> None:
        await self._emit(_event(kind, self.sequence, **fields))
        self.sequence += 1

    async def text(self, delta: str) -> None:
        suffix = self._job.chat.request_id.removeprefix("resp_")
        if not isinstance(self._open, OutputMessage):
            await self.close()
            item = OutputMessage(id=f"msg_{suffix}", status="in_progress", content=[])
            await self._add(item)
            part = OutputText(text="")
            item.content.append(part)
            await self.send(
                "response.content_part.added",
                item_id=item.id,
                output_index=len(self.output) - 1,
                content_index=0,
                part=part.model_dump(),
            )
        message = self._open
        assert isinstance(message, OutputMessage)
        message.content[0].text += delta
        await self.send(
            "response.output_text.delta",
            item_id=message.id,
            output_index=len(self.output) - 1,
            content_index=0,
            delta=delta,
            logprobs=[],
        )

    async def reasoning(self, delta: str) -> None:
        if not isinstance(self._open, OutputReasoning):
            await self.close()
            suffix = self._job.chat.request_id.removeprefix("resp_")
            await self._add(OutputReasoning(id=f"rs_{suffix}", content=[ReasoningText(text="")]))
        item = self._open
        assert isinstance(item, OutputReasoning)
        item.content[0].text += delta
        index = len(self.output) - 1
        await self.send(
            "response.reasoning_text.delta",
            item_id=item.id,
            output_index=index,
            content_index=0,
            delta=delta,
        )

    async def call(self, call_id: str, name: str) -> None:
        await self.close()
        suffix = self._job.chat.request_id.removeprefix("resp_")
        index = sum(isinstance(i, OutputFunctionCall) for i in self.output)
        item = OutputFunctionCall(
            id=f"fc_{suffix}_{index}",
            call_id=call_id,
            name=name,
            arguments="",
            status="in_progress",
        )
        await self._add(item)

    async def arguments(self, delta: str) -> None:
        if isinstance(self._open, OutputFunctionCall):
            self._open.arguments += delta
            await self.send(
                "response.function_call_arguments.delta",
                item_id=self._open.id,
                output_index=len(self.output) - 1,
                delta=delta,
            )

    async def close(self) -> None:
        item, self._open = self._open, None
        if item is None:
            return
        index = len(self.output) - 1
        if isinstance(item, OutputReasoning):
            text = item.content[0].text
            await self.send(
                "response.reasoning_text.done",
                item_id=item.id,
                output_index=index,
                content_index=0,
                text=text,
            )
        else:
            item.status = "completed"
        if isinstance(item, OutputMessage):
            part = item.content[0]
            await self.send(
                "response.output_text.done",
                item_id=item.id,
                output_index=index,
                content_index=0,
                text=part.text,
                logprobs=[],
            )
            await self.send(
                "response.content_part.done",
                item_id=item.id,
                output_index=index,
                content_index=0,
                part=part.model_dump(),
            )
        elif isinstance(item, OutputFunctionCall):
            await self.send(
                "response.function_call_arguments.done",
                item_id=item.id,
                output_index=index,
                name=item.name,
                arguments=item.arguments,
            )
        await self.send("response.output_item.done", output_index=index, item=item.model_dump())

    async def _add(self, item: OutputMessage | OutputFunctionCall | OutputReasoning) -> None:
        self.output.append(item)
        self._open = item
        await self.send(
            "response.output_item.added", output_index=len(self.output) - 1, item=item.model_dump()
        )


async def stream_response(ctx: ServingContext, job: ResponsesJob, emit: Emit) -> None:
    """Run, emitting response.created and .in_progress, each item's events, and
    response.completed with the usage."""
    events = _Events(emit, job)
    started = response_object(job, [], "in_progress").model_dump()
    await events.send("response.created", response=started)
    await events.send("response.in_progress", response=started)
    ending: dict[str, Any] = {"finish": None, "usage": None}

    async def on_chunk(chunk: BaseModel) -> None:
        assert isinstance(chunk, ChatCompletionChunk)
        if chunk.usage is not None:
            ending["usage"] = chunk.usage
        for choice in chunk.choices:
            thought = choice.delta.reasoning or choice.delta.reasoning_content
            if thought:
                await events.reasoning(thought)
            if choice.delta.content:
                await events.text(choice.delta.content)
            for call in choice.delta.tool_calls or []:
                if call.id is not None:
                    await events.call(call.id, call.function.name or "")
                if call.function.arguments:
                    await events.arguments(call.function.arguments)
            if choice.finish_reason is not None:
                ending["finish"] = choice.finish_reason

    await chat.stream_chat(ctx, job.chat, on_chunk)
    if not any(isinstance(i, (OutputMessage, OutputFunctionCall)) for i in events.output):
        await events.text("")  # as create_response: a message, if only an empty one
    await events.close()
    usage = ending["usage"] or UsageInfo(prompt_tokens=0, completion_tokens=0, total_tokens=0)
    # The whole answer as create_response would see it, for the final object.
    result = ChatCompletionResponse(
        id=job.chat.request_id,
        model=job.chat.model,
        choices=[
            ChatChoice(index=0, message=ChatResponseMessage(), finish_reason=ending["finish"])
        ],
        usage=usage,
    )
    response = finish(ctx, job, events.output, result)
    # As vLLM: response.completed whatever the status (incomplete at max_output_tokens),
    # the event the openai client's stream helper waits for.
    await events.send("response.completed", response=response.model_dump())


def stream_error(exc: OpenAIError) -> BaseModel:
    """The error event that ends a stream that failed once begun."""
    return _event("error", 0, code=exc.code, message=exc.message, param=exc.param)


def _event(kind: str, sequence: int, **fields: Any) -> ResponseEvent:
    return ResponseEvent.model_validate({"type": kind, "sequence_number": sequence, **fields})
