"""The OpenAI-compatible app: ``create_app(engine, ...)`` and the option types it takes.

The stable import point for apps (``from llmkit.http import create_app``); where the app
is built inside llmkit may change, this module's names do not.
"""

from llmkit.serving.options import ServingOptions
from llmkit.transports.http import create_app
from llmkit.transports.http_limits import RateLimits
from llmkit.transports.http_options import AccessOptions, HTTPOptions
from llmkit.transports.websocket_connection import WebSocketOptions

__all__ = [
    "AccessOptions",
    "HTTPOptions",
    "RateLimits",
    "ServingOptions",
    "WebSocketOptions",
    "create_app",
]
