"""Anthropic Messages <-> Chat Completions: a Messages request becomes a chat request (the
chat path renders, constrains and parses it), and OpenAIError becomes Anthropic's error."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from llmkit.protocol.anthropic import (
    AnthropicError,
    AnthropicErrorResponse,
    AnthropicMessage,
    CountTokensRequest,
    MessagesRequest,
)
from llmkit.protocol.anthropic.messages import ImageBlock, TextBlock, ThinkingBlock, ToolChoice
from llmkit.protocol.openai import ChatCompletionRequest, TokenizeRequest
from llmkit.serving.errors import OpenAIError, from_validation_error

# Anthropic's error type for each status.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}
# The chat request's names for the Messages request's fields.
_FIELDS = {"stop": "stop_sequences", "max_completion_tokens": "max_tokens"}


def anthropic_error(exc: OpenAIError) -> AnthropicErrorResponse:
    """The error as Anthropic's API words it; the message names the field (Anthropic's
    errors have no ``param``)."""
    param = _FIELDS.get(exc.param or "", exc.param)
    message = exc.message
    if param and param not in message:
        message = f"{param}: {message}"
    kind = _TYPES.get(exc.status, "invalid_request_error" if exc.status < 500 else "api_error")
    return AnthropicErrorResponse(error=AnthropicError(type=kind, message=message))


def chat_request(req: MessagesRequest) -> ChatCompletionRequest:
    """The chat completion request that asks the same of the model."""
    body: dict[str, Any] = {
        "model": req.model,
        "messages": chat_messages(req),
        "max_tokens": req.max_tokens,
        "stream": req.stream,
    }
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    sampling = {
        "stop": req.stop_sequences,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "top_k": req.top_k,
    }
    body |= {name: value for name, value in sampling.items() if value is not None}
    body |= _tools(req.tools, req.tool_choice)
    # vLLM's extra field, which its Messages endpoint takes as its chat endpoint does.
    if req.model_extra and "structured_outputs" in req.model_extra:
        body["structured_outputs"] = req.model_extra["structured_outputs"]
    return _validated(ChatCompletionRequest, body)


def tokenize_request(req: CountTokensRequest) -> TokenizeRequest:
    """The /tokenize request that renders the same prompt."""
    body: dict[str, Any] = {"model": req.model, "messages": chat_messages(req)}
    body["tools"] = _tools(req.tools, None).get("tools")
    return _validated(TokenizeRequest, body)


def chat_messages(req: CountTokensRequest) -> list[dict[str, Any]]:
    """The system text and the conversation as chat messages: a user turn's tool results
    become tool messages before it, an assistant's tool_use blocks its tool_calls."""
    messages: list[dict[str, Any]] = []
    if req.system:
        system = req.system
        text = system if isinstance(system, str) else "".join(b.text for b in system)
        messages.append({"role": "system", "content": text})
    for message in req.messages:
        messages += _turn(message)
    return messages


def _turn(message: AnthropicMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": message.role, "content": message.content}]
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    thoughts: list[str] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            thoughts.append(block.thinking)
        elif isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            source = block.source
            url = source.url or f"data:{source.media_type};base64,{source.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif block.type == "tool_use":
            function = {"name": block.name, "arguments": json.dumps(block.input)}
            calls.append({"id": block.id, "type": "function", "function": function})
        else:
            content = block.content
            text = content if isinstance(content, str) else "".join(b.text for b in content or [])
            results.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": text})
    turn: list[dict[str, Any]] = list(results)
    if message.role == "assistant":
        # A message has content or tool calls.
        said: list[dict[str, Any]] | str | None = parts or (None if calls else "")
        turn.append({"role": "assistant", "content": said, "tool_calls": calls or None})
        if thoughts:
            turn[-1]["reasoning_content"] = "\n".join(thoughts)
    elif parts or not results:
        turn.append({"role": "user", "content": parts})
    return turn


def _tools(tools: list[Any] | None, choice: ToolChoice | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": tool.input_schema,
                },
            }
            for tool in tools
        ]
    if choice is not None and (tools or choice.type in ("any", "tool")):
        if choice.type == "tool":
            if not choice.name:
                raise OpenAIError(400, 'tool_choice of type "tool" needs a name', "tool_choice")
            body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
        else:
            body["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
        if choice.disable_parallel_tool_use:
            body["parallel_tool_calls"] = False
    return body


def _validated(model: Any, body: dict[str, Any]) -> Any:
    try:
        return model.model_validate_json(json.dumps(body))
    except ValidationError as exc:
        raise from_validation_error(exc) from None
