"""The request schemas of the OpenAPI document, fitted to the served model.

The pydantic models state each field's type and range, the same that validates a request;
this adds what depends on the model (token ids below the vocabulary size, ``max_tokens``
and the logprobs counts within its limits, image parts only for a model that reads images,
``suffix`` only for one that can insert) and the rules between fields the server checks in
code (content required but for an assistant calling tools, ``stream_options`` only with
``stream``), so that what the document calls valid is what the server accepts. What JSON
Schema cannot state (a prompt's length in tokens) is said in the descriptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmkit.protocol.openai.chat import RESERVED_TEMPLATE_KWARGS
from llmkit.protocol.openai.common import StructuredOutputs

# Rules between fields that JSON Schema cannot state, and what the server answers.
_PROMPT_FITS = (
    "The prompt's tokens plus max_tokens (or max_completion_tokens) must fit the context "
    "(max_model_len); min_tokens may not exceed max_tokens; a 400 "
    "(code context_length_exceeded) otherwise."
)
_CHAT_RULES = (
    _PROMPT_FITS + " chat_template must be an installed template's name or a Jinja "
    "template that renders the messages; "
    "structured_outputs and response_format's schema must be a constraint the "
    "structured-output backend compiles (a valid JSON schema, regex or grammar); a tool "
    "named by tool_choice must be in tools, whose parameters are then such a JSON schema; "
    "top_logprobs needs logprobs: true."
)
# (top_logprobs's rule is only said: schemathesis generates from at most five
# dependentSchemas, and the other five are stated.)


@dataclass(frozen=True)
class ServedModel:
    """The facts of the served model that the request schemas depend on."""

    max_model_len: int
    max_logprobs: int
    vocab_size: int
    hidden_size: int
    supports_images: bool
    can_insert: bool  # it has the fill-in-the-middle tokens (code completion, suffix)
    has_chat_template: bool
    auto_tool_choice: bool


def fit_requests(schemas: dict[str, Any], model: ServedModel) -> None:
    """Tighten the request schemas in ``schemas`` (``$defs`` by model name) in place."""
    token_id = {"type": "integer", "minimum": 0, "maximum": model.vocab_size - 1}
    for name in ("CompletionRequest", "ChatCompletionRequest"):
        props = schemas[name]["properties"]
        for field in ("max_tokens", "max_completion_tokens"):
            # At least one prompt token: the completion gets the rest of the context.
            bound(props, field, model.max_model_len - 1)
        for field in ("logprobs", "top_logprobs", "prompt_logprobs"):
            bound(props, field, model.max_logprobs)
        _token_ids(props["stop_token_ids"], token_id)
        bias = props["logit_bias"]["anyOf"][0]
        bias["propertyNames"] = {"pattern": _below(model.vocab_size)}
        # stream_options only with stream: true.
        schemas[name]["dependentSchemas"] = {
            "stream_options": {
                "anyOf": [
                    {"properties": {"stream_options": {"type": "null"}}},
                    {"properties": {"stream": {"const": True}}, "required": ["stream"]},
                ]
            }
        }
    completion = schemas["CompletionRequest"]
    _token_ids(completion["properties"]["prompt"], token_id)
    if not model.can_insert:
        completion["properties"]["suffix"] = {"type": "null", "default": None}
    completion["description"] = _PROMPT_FITS
    completion["dependentSchemas"]["use_beam_search"] = _beam_search(model.max_logprobs // 2)
    chat = schemas["ChatCompletionRequest"]
    chat["description"] = _CHAT_RULES
    _fit_tools(chat, model)
    _fit_structured(schemas)
    _fit_messages(schemas, model)
    _fit_tokenize(schemas["TokenizeRequest"], model)
    for name in ("ChatCompletionRequest", "TokenizeRequest"):
        _template_rules(schemas[name])
    _token_ids(schemas["DetokenizeRequest"]["properties"]["tokens"], token_id)
    embedding = schemas["EmbeddingRequest"]["properties"]
    _token_ids(embedding["input"], token_id)
    bound(embedding, "dimensions", model.hidden_size)
    bound(embedding, "truncate_prompt_tokens", model.max_model_len)
    schemas["EmbeddingRequest"]["description"] = (
        "Each input's tokens must fit the context (max_model_len) unless "
        "truncate_prompt_tokens is set; a 400 (code context_length_exceeded) otherwise."
    )


def _beam_search(widest: int) -> dict[str, Any]:
    """use_beam_search: not with stream, and at most ``widest`` beams (each reads twice the
    beams' number of logprobs a step); best_of (the beams) or else n is the width."""
    off = {"properties": {"use_beam_search": {"const": False}}}
    if widest < 1:
        return off
    width = {"type": "integer", "maximum": widest}
    on = {
        "properties": {
            "stream": {"const": False},
            "n": width,
            "best_of": {"anyOf": [{"type": "null"}, width]},
        }
    }
    return {"anyOf": [off, on]}


def _fit_messages(schemas: dict[str, Any], model: ServedModel) -> None:
    message = schemas["ChatMessage"]
    message["anyOf"] = [
        {"properties": {"content": {"type": ["string", "array"]}}, "required": ["content"]},
        {
            "properties": {
                "role": {"const": "assistant"},
                "tool_calls": {"type": "array", "minItems": 1},
            },
            "required": ["role", "tool_calls"],
        },
    ]
    text = {
        "type": "object",
        "properties": {"type": {"enum": ["text", "input_text"]}, "text": {"type": "string"}},
        "required": ["type", "text"],
    }
    parts = [text]
    if model.supports_images:
        image = schemas["ImageURL"]
        parts.append(
            {
                "type": "object",
                "properties": {"type": {"const": "image_url"}, "image_url": image},
                "required": ["type", "image_url"],
                "description": "The URL must be a data: URL or one the server can fetch.",
            }
        )
    part = schemas["ContentPart"]
    part["anyOf"] = parts


def _fit_tools(chat: dict[str, Any], model: ServedModel) -> None:
    """Tools are functions with names; tool_choice needs tools, and "auto" (the default
    with tools) a server started with a tool-call parser."""
    props = chat["properties"]
    props["tools"] = tools_schema()
    modes = ["none", "required"] + (["auto"] if model.auto_tool_choice else [])
    named = {
        "type": "object",
        "properties": {
            "function": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            }
        },
        "required": ["function"],
    }
    props["tool_choice"] = _nullable({"enum": modes}, named)
    no_tools = {"properties": {"tools": {"anyOf": [{"type": "null"}, {"maxItems": 0}]}}}
    rules = chat.setdefault("dependentSchemas", {})
    # A choice other than none needs tools.
    rules["tool_choice"] = {
        "anyOf": [
            {"properties": {"tool_choice": {"enum": [None, "none"]}}},
            {"properties": {"tools": {"type": "array", "minItems": 1}}, "required": ["tools"]},
        ]
    }
    if not model.auto_tool_choice:
        # Tools need a choice the server can serve: not the default, auto.
        rules["tools"] = {
            "anyOf": [
                no_tools,
                {
                    "properties": {"tool_choice": {"type": ["string", "object"]}},
                    "required": ["tool_choice"],
                },
            ]
        }


def _fit_structured(schemas: dict[str, Any]) -> None:
    """structured_outputs sets exactly one kind of constraint; response_format's json_schema
    carries a schema; the two are not both set."""
    fields = StructuredOutputs.model_json_schema(by_alias=True)["properties"]
    # Each kind as the model states it when set (json_object false is not asking).
    kinds = {name: field["anyOf"][0] for name, field in fields.items()}
    kinds["json_object"] = {"const": True}
    unset = {name: {"type": "null"} for name in kinds} | {"json_object": {"enum": [None, False]}}
    constraint = {
        "anyOf": [
            {
                "type": "object",
                "properties": unset | {name: kind},
                "required": [name],
                "additionalProperties": False,
            }
            for name, kind in kinds.items()
        ]
    }
    for name in ("CompletionRequest", "ChatCompletionRequest"):
        schemas[name]["properties"]["structured_outputs"] = _nullable(constraint)
    schemas["ResponseFormat"]["anyOf"] = [
        {"properties": {"type": {"enum": ["text", "json_object"]}}},
        {
            "properties": {
                "json_schema": {
                    "type": "object",
                    "properties": {"schema": {"type": "object"}},
                    "required": ["schema"],
                }
            },
            "required": ["json_schema"],
        },
    ]
    text_or_none = {"anyOf": [{"type": "null"}, {"properties": {"type": {"const": "text"}}}]}
    schemas["ChatCompletionRequest"]["dependentSchemas"]["response_format"] = {
        "anyOf": [
            {"properties": {"response_format": text_or_none}},
            {"properties": {"structured_outputs": {"type": "null"}}},
        ]
    }


def _template_rules(request: dict[str, Any]) -> None:
    """continue_final_message with add_generation_prompt false (it defaults to true), and
    template kwargs that leave the request's own arguments alone."""
    rules = request.setdefault("dependentSchemas", {})
    rules["continue_final_message"] = {
        "anyOf": [
            {"properties": {"continue_final_message": {"const": False}}},
            {
                "properties": {"add_generation_prompt": {"const": False}},
                "required": ["add_generation_prompt"],
            },
        ]
    }
    kwargs = request["properties"]["chat_template_kwargs"]["anyOf"][0]
    kwargs["propertyNames"] = {"not": {"enum": sorted(RESERVED_TEMPLATE_KWARGS)}}


def tools_schema() -> dict[str, Any]:
    """``tools``: functions with names (chat requests and /tokenize check them alike)."""
    function = {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}},
        "required": ["name"],
    }
    tool = {
        "type": "object",
        "properties": {"type": {"const": "function"}, "function": function},
        "required": ["function"],
    }
    return _nullable({"type": "array", "items": tool})


def _fit_tokenize(tokenize: dict[str, Any], model: ServedModel) -> None:
    tokenize["properties"]["tools"] = tools_schema()
    prompt = {"properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}
    messages = {"properties": {"messages": {"type": "array"}}, "required": ["messages"]}
    tokenize["properties"]["prompt"] = _nullable({"type": "string"})
    if model.has_chat_template:
        # Exactly one of the two forms.
        tokenize["oneOf"] = [prompt, messages]
        tokenize["description"] = "Either a prompt or chat messages."
    else:
        # Without a chat template, messages cannot be rendered: a prompt it is.
        tokenize["properties"]["messages"] = {"type": "null"}
        tokenize["properties"]["prompt"] = {"type": "string"}
        tokenize["required"] = ["prompt"]


def bound(properties: dict[str, Any], name: str, maximum: int) -> None:
    """Give the integer form of ``properties[name]`` an upper bound."""
    schema = properties.get(name)
    if schema is None:
        return
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "integer":
            option["maximum"] = maximum


def _token_ids(schema: dict[str, Any], token_id: dict[str, Any]) -> None:
    """Each integer in ``schema`` (a prompt's token ids, in any of its forms) a token id."""
    if schema.get("type") == "integer":
        schema |= token_id
    for option in schema.get("anyOf", []):
        _token_ids(option, token_id)
    if isinstance(schema.get("items"), dict):
        _token_ids(schema["items"], token_id)


def _nullable(*options: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [*options, {"type": "null"}], "default": None}


def _below(bound: int) -> str:
    """A regex of the decimal integers 0 <= n < bound (leading zeros allowed)."""
    top = str(bound - 1)
    alternatives = ["0"] if bound >= 1 else []
    # Every length shorter than the top's, with a nonzero first digit.
    alternatives += ["[1-9]" + "[0-9]" * (n - 1) for n in range(1, len(top))]
    # The top's length: below the top at some digit, equal before it; or the top itself.
    for i, digit in enumerate(top):
        low = "1" if i == 0 else "0"
        if int(digit) > int(low):
            alternatives.append(
                top[:i] + f"[{low}-{int(digit) - 1}]" + "[0-9]" * (len(top) - i - 1)
            )
    alternatives.append(top)
    # Sorted by length, then text: the same document on every start (a set's order varies).
    return "^0*(" + "|".join(sorted(set(alternatives), key=lambda a: (len(a), a))) + ")$"
