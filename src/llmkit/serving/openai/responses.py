"""/v1/responses (OpenAI's Responses API) over the chat path: input items and stored
history become a chat request; its answer becomes output items; stored for the next."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from llmkit.protocol.openai import ChatCompletionRequest, ChatCompletionResponse
from llmkit.protocol.openai.responses import (
    DeletedResponse,
    FunctionCallItem,
    IncompleteDetails,
    MessageItem,
    OutputFunctionCall,
    OutputItem,
    OutputMessage,
    OutputReasoning,
    OutputText,
    ReasoningText,
    ResponseObject,
    ResponsesRequest,
    ResponseUsage,
)
from llmkit.serving import media
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError, from_validation_error
from llmkit.serving.openai import chat
from llmkit.serving.responses_store import StoredResponse

# The chat request's names for the Responses request's fields, for 400s.
_FIELDS = {
    "messages": "input",
    "max_tokens": "max_output_tokens",
    "response_format": "text",
    "structured_outputs": "text",
}

_CHAT_EXTRAS = frozenset(
    {"seed", "top_k", "min_p", "repetition_penalty", "stop", "structured_outputs", "priority"}
)


@dataclass
class ResponsesJob:
    """A checked, started response: the chat job and what to store after it."""

    chat: chat.ChatJob
    req: ResponsesRequest
    history: list[dict[str, Any]]  # the conversation without the instructions

    @property
    def streams(self) -> list[Any]:
        """The engine streams, for a transport to close."""
        return self.chat.streams


async def prepare_response(
    ctx: ServingContext, req: ResponsesRequest, response_id: str
) -> ResponsesJob:
    """Check everything, render the prompt and start; raises OpenAIError before any answer."""
    history: list[dict[str, Any]] = []
    if req.previous_response_id is not None:
        stored = ctx.responses.get(req.previous_response_id)
        if stored is None:
            raise OpenAIError(
                404,
                f"Previous response with id '{req.previous_response_id}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        history = list(stored.messages)
    history += input_messages(req.input)
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    body: dict[str, Any] = {
        "model": req.model,
        "messages": system + history,
        "stream": req.stream,
        "parallel_tool_calls": req.parallel_tool_calls,
    }
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    sampling = {
        "max_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
    }
    body |= {name: value for name, value in sampling.items() if value is not None}
    # vLLM's extra sampling fields, taken as its chat requests take them.
    body |= {k: v for k, v in (req.model_extra or {}).items() if k in _CHAT_EXTRAS}
    if req.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.parameters or {"type": "object"},
                },
            }
            for t in req.tools
        ]
    if req.tool_choice is not None:
        choice = req.tool_choice
        body["tool_choice"] = (
            choice
            if isinstance(choice, str)
            else {"type": "function", "function": {"name": choice.name}}
        )
    fmt = req.text.format if req.text else None
    if fmt is not None and fmt.type == "json_schema":
        schema = {"name": fmt.name or "response", "schema": fmt.schema_, "strict": fmt.strict}
        body["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif fmt is not None and fmt.type == "json_object":
        body["response_format"] = {"type": "json_object"}
    with _named():
        try:
            request = ChatCompletionRequest.model_validate_json(json.dumps(body))
        except ValidationError as exc:
            raise from_validation_error(exc) from None
        images = await media.chat_images(ctx, request.messages)
        job = await chat.prepare_chat(ctx, request, response_id, images)
    return ResponsesJob(job, req, history)


async def create_response(ctx: ServingContext, job: ResponsesJob) -> ResponseObject:
    """Run to the end, answer with the response object, and store it if asked."""
    result = await chat.create_chat(ctx, job.chat)
    return finish(ctx, job, output_items(job.chat.request_id, result), result)


def finish(
    ctx: ServingContext,
    job: ResponsesJob,
    output: list[OutputItem],
    result: ChatCompletionResponse,
) -> ResponseObject:
    """The finished response object (stored when ``store``)."""
    choice = result.choices[0]
    usage = result.usage
    response = response_object(job, output, "completed")
    response.usage = ResponseUsage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )
    if choice.finish_reason == "length":
        response.status = "incomplete"
        response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
    if job.req.store:
        said = [m for m in output if isinstance(m, OutputMessage)]
        calls = [c for c in output if isinstance(c, OutputFunctionCall)]
        answer: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(p.text for m in said for p in m.content) or None,
        }
        if calls:
            answer["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        elif answer["content"] is None:
            answer["content"] = ""
        ctx.responses.put(StoredResponse(response, [*job.history, answer]))
    return response


def response_object(job: ResponsesJob, output: list[OutputItem], status: Any) -> ResponseObject:
    """The response object as the request shaped it, with ``output`` so far."""
    req = job.req
    choice = req.tool_choice
    return ResponseObject(
        id=job.chat.request_id,
        status=status,
        model=job.chat.model,
        output=output,
        instructions=req.instructions,
        tools=[t.model_dump(exclude_none=True) for t in req.tools or []],
        tool_choice=choice.model_dump()
        if choice is not None and not isinstance(choice, str)
        else choice or "auto",
        parallel_tool_calls=req.parallel_tool_calls,
        text=req.text.model_dump(by_alias=True, exclude_none=True)
        if req.text and req.text.format
        else {"format": {"type": "text"}},
        temperature=req.temperature,
        top_p=req.top_p,
        max_output_tokens=req.max_output_tokens,
        previous_response_id=req.previous_response_id,
        store=req.store,
        metadata=req.metadata or {},
    )


def output_items(response_id: str, result: ChatCompletionResponse) -> list[OutputItem]:
    """The chat answer as output items: reasoning, the message, then the calls."""
    message = result.choices[0].message
    suffix = response_id.removeprefix("resp_")
    items: list[OutputItem] = []
    if message.reasoning or message.reasoning_content:
        text = ReasoningText(text=message.reasoning or message.reasoning_content or "")
        items.append(OutputReasoning(id=f"rs_{suffix}", content=[text]))
    if message.content or not message.tool_calls:
        items.append(
            OutputMessage(id=f"msg_{suffix}", content=[OutputText(text=message.content or "")])
        )
    items += [
        OutputFunctionCall(
            id=f"fc_{suffix}_{i}",
            call_id=call.id,
            name=call.function.name,
            arguments=call.function.arguments,
        )
        for i, call in enumerate(message.tool_calls or [])
    ]
    return items


def input_messages(items: str | list[Any]) -> list[dict[str, Any]]:
    """Input items as chat messages: calls join the assistant turn before their outputs."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, MessageItem):
            content: Any = item.content
            if not isinstance(item.content, str):
                content = [{"type": "text", "text": part.text} for part in item.content]
            messages.append({"role": item.role, "content": content})
        elif isinstance(item, FunctionCallItem):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
    return messages


@contextlib.contextmanager
def _named() -> Iterator[None]:
    """4xx raised inside name the Responses request's fields (``_FIELDS``)."""
    try:
        yield
    except OpenAIError as exc:
        old = exc.param or ""
        new = _FIELDS.get(old)
        if new is None:
            raise
        message = exc.message
        if message.startswith(old):
            message = new + message.removeprefix(old)
        raise OpenAIError(exc.status, message, new, exc.code) from None


def retrieve_response(ctx: ServingContext, response_id: str) -> ResponseObject:
    return _stored(ctx, response_id).response


def delete_response(ctx: ServingContext, response_id: str) -> DeletedResponse:
    _stored(ctx, response_id)
    ctx.responses.delete(response_id)
    return DeletedResponse(id=response_id)


def cancel_response(ctx: ServingContext, response_id: str) -> ResponseObject:
    """Only background responses can be cancelled, and this server runs none."""
    _stored(ctx, response_id)
    raise OpenAIError(
        400, "Only responses created with background=true can be cancelled.", "response_id"
    )


def _stored(ctx: ServingContext, response_id: str) -> StoredResponse:
    stored = ctx.responses.get(response_id)
    if stored is None:
        raise OpenAIError(
            404, f"Response with id '{response_id}' not found.", "response_id", "not_found"
        )
    return stored
