"""Anthropic's Messages API's endpoints, each declared once (transports/endpoints.py): their own
errors in Anthropic's shape, with OpenAI's meanings."""

from __future__ import annotations

from llmkit.protocol.anthropic import (
    AnthropicErrorResponse,
    CountTokensRequest,
    CountTokensResponse,
    MessagesRequest,
    MessagesResponse,
)
from llmkit.serving.anthropic.convert import anthropic_error
from llmkit.transports.endpoints import Api, Endpoint
from llmkit.transports.openai.endpoints import ERRORS

_EVENTS = (
    "Each event's JSON after its `event: <type>` line: message_start, ping, "
    "content_block_start/_delta/_stop, message_delta, message_stop (or error)."
)

_ENDPOINTS = (
    Endpoint("/v1/messages", "POST", "messages",
             "Answer a conversation (Anthropic's Messages API).", MessagesRequest,
             MessagesResponse, "sse", (400, 404, 503), "generate", MessagesResponse, _EVENTS),
    Endpoint("/v1/messages/count_tokens", "POST", "count_tokens",
             "Count a conversation's tokens (Anthropic's Messages API).", CountTokensRequest,
             CountTokensResponse, errors=(400, 404, 503), task="generate"),
)  # fmt: skip
ANTHROPIC = Api("anthropic", _ENDPOINTS, ERRORS, AnthropicErrorResponse, anthropic_error)
