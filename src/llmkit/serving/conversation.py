"""Chat messages -> the conversation a template renders, in the content format it reads."""

from __future__ import annotations

import contextlib
import functools
import json
from typing import Any, Literal

import jinja2
from jinja2 import nodes

from llmkit.chat.resolve import resolve_chat_template
from llmkit.protocol.openai import ChatMessage
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import bad_request

_TEXT_PARTS = ("text", "input_text")

Format = Literal["string", "openai"]


def _reads_content(node: nodes.Node) -> bool:
    """``x['content']`` or ``x.content``."""
    if isinstance(node, nodes.Getitem):
        return isinstance(node.arg, nodes.Const) and node.arg.value == "content"
    return isinstance(node, nodes.Getattr) and node.attr == "content"


@functools.lru_cache(maxsize=32)
def template_content_format(template: str) -> Format:
    """``"openai"`` if the template loops over a message's content, else ``"string"``.

    vLLM's detection: a template written for lists of parts iterates over them, directly
    or through a variable set from the content.
    """
    try:
        ast = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(template)
    except jinja2.TemplateSyntaxError:
        return "string"  # rendering reports the error, with the messages' context
    content_vars = {
        assign.target.name
        for assign in ast.find_all(nodes.Assign)
        if isinstance(assign.target, nodes.Name) and _reads_content(assign.node)
    }
    for loop in ast.find_all(nodes.For):
        source = loop.iter
        while isinstance(source, nodes.Filter) and source.node is not None:
            source = source.node
        if _reads_content(source) or (
            isinstance(source, nodes.Name) and source.name in content_vars
        ):
            return "openai"
    return "string"


def content_format(ctx: ServingContext, request_template: str | None) -> Format:
    """The format the server's setting asks for, ``auto`` resolved on the template in use
    (``request_template``: the request's template text or name)."""
    setting = ctx.options.chat_template_content_format
    if setting != "auto":
        return setting
    template = (
        _resolved(request_template) or ctx.chat_template or ctx.engine.tokenizer.chat_template
    )
    return template_content_format(template) if isinstance(template, str) else "string"


def to_conversation(
    messages: list[ChatMessage], fmt: Format = "string", image_placeholder: str | None = None
) -> list[dict[str, Any]]:
    """Messages as chat templates expect them.

    ``"string"`` joins text parts with newlines, as vLLM does, an image part becoming
    ``image_placeholder`` (a multimodal model's ``<image>``); ``"openai"`` gives every
    message's content as a list of parts, ``{"type": "image"}`` for an image and a plain
    string becoming one text part.
    """
    conversation = []
    for i, message in enumerate(messages):
        entry = message.model_dump(exclude_none=True)
        parts: list[dict[str, str]] | None = None
        if isinstance(message.content, list):
            parts = [_part(i, part, image_placeholder) for part in message.content]
        elif isinstance(message.content, str):
            parts = [{"type": "text", "text": message.content}]
        for call in entry.get("tool_calls") or []:
            _parse_arguments(call)
        # Templates read an assistant's reasoning under either name (GLM's and Qwen3's
        # reasoning_content, others' reasoning): both carry whichever the client sent.
        thought = entry.get("reasoning_content") or entry.get("reasoning")
        if thought:
            entry["reasoning_content"] = entry["reasoning"] = thought
        if parts is not None:
            if fmt == "openai":
                entry["content"] = parts
            else:
                entry["content"] = "\n".join(p.get("text", image_placeholder or "") for p in parts)
        conversation.append(entry)
    return conversation


def _part(i: int, part: Any, image_placeholder: str | None) -> dict[str, str]:
    if part.type == "image_url" and image_placeholder is not None:
        return {"type": "image"}
    if part.type not in _TEXT_PARTS or part.text is None:
        supported = "text and image_url" if image_placeholder else "only text"
        raise bad_request(
            f"messages.{i}.content: content parts of type {part.type!r} are not supported "
            f"by this model ({supported})",
            "messages",
        )
    return {"type": "text", "text": part.text}


def _parse_arguments(call: Any) -> None:
    """A call's ``function.arguments`` JSON as a dict, as templates read it (vLLM does the
    same); text that is not JSON stays text."""
    function = call.get("function") if isinstance(call, dict) else None
    if isinstance(function, dict) and isinstance(function.get("arguments"), str):
        with contextlib.suppress(ValueError):
            function["arguments"] = json.loads(function["arguments"])


def message_text(message: ChatMessage) -> str | None:
    """A message's content as one string, its text parts joined as ``"string"`` joins them."""
    if isinstance(message.content, list):
        return "\n".join(part.text or "" for part in message.content)
    return message.content


def _resolved(value: str | None) -> str | None:
    """A request's ``chat_template``, an installed template's name or the template text,
    as the text; a 400 naming the field if it is neither. (The engine resolves it the
    same way again, from its cache, when it renders.)"""
    if value is None:
        return None
    try:
        return resolve_chat_template(value)
    except ValueError as exc:
        raise bad_request(str(exc), "chat_template") from None
