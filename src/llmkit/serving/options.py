"""ServingOptions: how the OpenAI endpoints shape their answers (vLLM's server flags, each
declared here with its field)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from llmkit.config.option import option
from llmkit.plugins import REASONING_PARSERS, TOOL_PARSERS, load

ContentFormat = Literal["auto", "string", "openai"]
CONTENT_FORMATS: tuple[ContentFormat, ...] = ("auto", "string", "openai")
ReasoningField = Literal["both", "reasoning", "reasoning_content"]


def _installed(group: str) -> Callable[[str], str]:
    """A flag's check that names a plugin of ``group``: loaded now, so that a missing or
    broken one costs no model loading time."""

    def check(name: str) -> str:
        load(group, name)
        return name

    return check


def _directory(path: str) -> str:
    if not os.path.isdir(path):
        raise ValueError(f"{path!r} is not a directory")
    return path


@dataclass(frozen=True)
class ServingOptions:
    """Server-wide answer settings; the defaults answer as OpenAI's API does.

    ``chat_template_content_format``: how a message's list of content parts reaches the
    chat template: ``"string"`` joins the text parts into one string, ``"openai"`` passes
    ``[{"type": "text", "text": ...}, ...]`` (string content too), ``"auto"`` picks
    ``"openai"`` when the template loops over a message's content.
    ``response_role``: the role of the generated message and of the first stream delta
    (where the request adds a generation prompt; else the last message's role, as vLLM).
    ``return_tokens_as_token_ids``: logprob tokens read ``token_id:N``, for tokens that
    do not survive decoding on their own.
    ``force_include_usage``: every stream ends with a usage chunk, asked for or not.
    ``prompt_tokens_details``: usage carries ``prompt_tokens_details.cached_tokens``.
    ``tool_call_parser``: the ``llmkit.tool_parsers`` plugin that reads tool calls out of
    the output; ``enable_auto_tool_choice`` lets the model decide to call tools
    (``tool_choice="auto"``), which needs a parser. ``reasoning_parser``: the
    ``llmkit.reasoning_parsers`` plugin that separates the reasoning, which chat answers
    carry in ``reasoning`` and ``reasoning_content`` alike (clients read either name), or in
    the one ``reasoning_field`` names.
    ``structured_outputs_compile_timeout_s``: how long a request's grammar, schema or
    regex may take to compile (off the event loop) before the request is a 400.
    ``allowed_media_domains``: the hosts whose ``http(s)`` image URLs are fetched (none:
    only ``data:`` URLs), within ``media_fetch_timeout_s`` and ``max_media_bytes``;
    ``allowed_local_media_path``: the directory ``file:`` image URLs may read (none: no
    ``file:`` URLs).
    """

    chat_template_content_format: ContentFormat = option(
        "auto",
        group="answers",
        help="how list-of-parts message content reaches the chat template: 'string' joins "
        "the text parts, 'openai' passes [{'type': 'text', 'text': ...}], 'auto' picks "
        "'openai' if the template loops over a message's content (default: auto)",
    )
    response_role: str = option(
        "assistant",
        group="answers",
        help="the role of the generated chat message and the first stream delta "
        "(default: assistant)",
    )
    return_tokens_as_token_ids: bool = option(
        False, group="answers", help="name logprob tokens 'token_id:N' instead of their text"
    )
    force_include_usage: bool = option(
        False,
        name="--enable-force-include-usage",
        group="answers",
        help="end every stream with a usage chunk, even when stream_options did not ask",
    )
    prompt_tokens_details: bool = option(
        False,
        name="--enable-prompt-tokens-details",
        group="answers",
        help="add usage.prompt_tokens_details.cached_tokens (prompt tokens found in the "
        "prefix cache)",
    )
    tool_call_parser: str | None = option(
        None,
        group="plugins",
        metavar="NAME",
        parse=_installed(TOOL_PARSERS),
        help="the llmkit.tool_parsers plugin that reads tool calls in the output (built in: "
        "hermes, llama3_json, mistral, pythonic, qwen3_coder, openai, deepseek_v31, glm45, "
        "kimi_k2)",
    )
    enable_auto_tool_choice: bool = option(
        False,
        group="plugins",
        help='let the model decide to call tools (tool_choice "auto", the default when a '
        "request has tools); needs --tool-call-parser",
    )
    reasoning_parser: str | None = option(
        None,
        group="plugins",
        metavar="NAME",
        parse=_installed(REASONING_PARSERS),
        help="the llmkit.reasoning_parsers plugin that moves reasoning out of the content "
        "(built in: deepseek_r1, qwen3, openai)",
    )
    reasoning_field: ReasoningField = option(
        "both",
        group="plugins",
        help="the chat answer's field(s) for the reasoning: reasoning (vLLM's current name), "
        "reasoning_content (DeepSeek's and older vLLM's), or both (default)",
    )
    structured_outputs_compile_timeout_s: float = option(
        5.0,
        group="plugins",
        metavar="S",
        help="how long a request's JSON schema, regex or grammar may take to compile (off "
        "the event loop) before the request is a 400 (default: 5)",
    )
    allowed_media_domains: tuple[str, ...] = option(
        (),
        group="media",
        nargs="+",
        metavar="HOST",
        help="hosts whose http(s) image URLs the server fetches (exact names; default: none)",
    )
    allowed_local_media_path: str | None = option(
        None,
        group="media",
        metavar="DIR",
        parse=_directory,
        help="a directory that file: image URLs may read from (default: none)",
    )
    # Settings for apps only; the server keeps their defaults.
    media_fetch_timeout_s: float = 10.0
    max_media_bytes: int = 20 * 1024 * 1024

    @property
    def reasoning_fields(self) -> tuple[str, ...]:
        """The names a chat answer carries its reasoning under."""
        both = ("reasoning", "reasoning_content")
        return both if self.reasoning_field == "both" else (self.reasoning_field,)

    def __post_init__(self) -> None:
        if self.chat_template_content_format not in CONTENT_FORMATS:
            raise ValueError(
                f"chat_template_content_format must be one of {', '.join(CONTENT_FORMATS)}, "
                f"got {self.chat_template_content_format!r}"
            )
        if self.reasoning_field not in ("both", "reasoning", "reasoning_content"):
            raise ValueError(
                "reasoning_field must be both, reasoning or reasoning_content, "
                f"got {self.reasoning_field!r}"
            )
        if not self.response_role.strip():
            raise ValueError("response_role must not be empty")
        if self.enable_auto_tool_choice and not self.tool_call_parser:
            raise ValueError("enable_auto_tool_choice needs a tool_call_parser")
        if not self.structured_outputs_compile_timeout_s > 0:
            raise ValueError("structured_outputs_compile_timeout_s must be more than 0")
        if not self.media_fetch_timeout_s > 0 or self.max_media_bytes < 1:
            raise ValueError("media_fetch_timeout_s and max_media_bytes must be positive")
