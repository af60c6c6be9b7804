"""A Python client of the ``/v1/ws`` endpoint: ``WebSocketClient``.

The stable import point for apps (``from llmkit.websocket import WebSocketClient``).
"""

from llmkit.transports.websocket.client import WebSocketClient

__all__ = ["WebSocketClient"]
