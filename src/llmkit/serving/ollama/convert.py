"""Ollama's requests as the OpenAI requests serving/ already runs: options to sampling fields,
``format`` to structured outputs, ``think`` to the template's switch, images to data URLs."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from llmkit.protocol.ollama import ChatRequest, EmbedRequest, GenerateRequest, Message
from llmkit.protocol.ollama.requests import Options
from llmkit.protocol.openai import ChatCompletionRequest, CompletionRequest, EmbeddingRequest
from llmkit.serving.errors import from_validation_error

# Ollama's option -> the OpenAI (vLLM) request field.
_OPTIONS = {
    "num_predict": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "stop": "stop",
    "repeat_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}
# The first bytes of a base64 image, for its data URL's media type.
_MAGIC = {"iVBOR": "image/png", "/9j/": "image/jpeg", "R0lGOD": "image/gif", "UklGR": "image/webp"}


def sampling_fields(options: Options | None) -> dict[str, Any]:
    given = options.model_dump(exclude_none=True) if options else {}
    fields = {_OPTIONS[k]: v for k, v in given.items() if k in _OPTIONS}
    if fields.get("max_tokens", 1) <= 0:  # -1: no limit, -2: fill the context
        del fields["max_tokens"]
    return fields


def _format(value: object) -> dict[str, Any]:
    if value == "json":
        return {"response_format": {"type": "json_object"}}
    if isinstance(value, dict):
        schema = {"name": "format", "schema": value}
        return {"response_format": {"type": "json_schema", "json_schema": schema}}
    return {}


def _common(req: ChatRequest | GenerateRequest, model: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"model": model, "stream": req.stream, **sampling_fields(req.options)}
    fields |= _format(req.format)
    if req.stream:
        fields["stream_options"] = {"include_usage": True}  # the final chunk's counts
    if req.think is not None:
        # Qwen3's and others' templates switch thinking on this; the reasoning parser, where
        # the server has one, moves the thoughts to ``thinking``.
        fields["chat_template_kwargs"] = {"enable_thinking": bool(req.think)}
    return fields


def data_url(image: str) -> str:
    kind = next((t for magic, t in _MAGIC.items() if image.startswith(magic)), "image/png")
    return f"data:{kind};base64,{image}"


def _message(message: Message, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content or ""}]
        parts += [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in message.images]
        out["content"] = parts
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": f"call_{index}_{n}",
                "type": "function",
                "function": {
                    "name": c.function.name,
                    "arguments": json.dumps(c.function.arguments),
                },
            }
            for n, c in enumerate(message.tool_calls)
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_name or ""
    return out


def chat_request(req: ChatRequest, model: str, auto_tools: bool) -> ChatCompletionRequest:
    """``/api/chat`` as ``/v1/chat/completions``; a 400 naming the field if it cannot be.

    ``auto_tools``: the server parses tool calls (--enable-auto-tool-choice); without,
    the tools still reach the template, and the answer is text (tool_choice "none")."""
    messages = [_message(m, i) for i, m in enumerate(req.messages)]
    choice = None if auto_tools or not req.tools else "none"
    fields = _common(req, model)
    return _validate(
        ChatCompletionRequest, messages=messages, tools=req.tools, tool_choice=choice, **fields
    )


def generate_request(req: GenerateRequest, model: str) -> ChatCompletionRequest | CompletionRequest:
    """``/api/generate``: the prompt through the chat template as a user turn (after
    ``system``), or as it is with ``raw``; with a ``suffix``, what comes before the middle
    a code model fills in (its FIM prompt, as Ollama's templates build it)."""
    if req.suffix:
        return _validate(
            CompletionRequest, prompt=req.prompt or "", suffix=req.suffix, **_common(req, model)
        )
    if req.raw:
        return _validate(CompletionRequest, prompt=req.prompt or "", **_common(req, model))
    messages = [Message(role="system", content=req.system)] if req.system else []
    messages.append(Message(role="user", content=req.prompt or "", images=req.images))
    fields = _common(req, model)
    return _validate(ChatCompletionRequest, messages=[_message(m, 0) for m in messages], **fields)


def embed_request(req: EmbedRequest, model: str) -> EmbeddingRequest:
    truncate = -1 if req.truncate else None
    return _validate(
        EmbeddingRequest,
        model=model,
        input=req.input,
        dimensions=req.dimensions,
        truncate_prompt_tokens=truncate,
    )


def _validate(wire: Any, **fields: Any) -> Any:
    try:
        return wire.model_validate(fields)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
