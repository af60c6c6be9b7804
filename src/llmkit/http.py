"""The OpenAI-compatible app: ``create_app(engine, AppOptions(...))`` and the option types it
takes.

The stable import point for apps (``from llmkit.http import create_app``); where the app
is built inside llmkit may change, this module's names do not.
"""

from llmkit.serving.options import ServingOptions
from llmkit.transports.app import create_app
from llmkit.transports.http.limits import RateLimits
from llmkit.transports.http.options import AccessOptions, HTTPOptions
from llmkit.transports.options import AppOptions
from llmkit.transports.websocket.options import WebSocketOptions

__all__ = [
    "AccessOptions",
    "AppOptions",
    "HTTPOptions",
    "RateLimits",
    "ServingOptions",
    "WebSocketOptions",
    "create_app",
]
