"""WebSocketOptions: the limits of the ``/v1/ws`` endpoint, each with its serve flag."""

from __future__ import annotations

from dataclasses import dataclass

from llmkit.config.option import option


@dataclass(frozen=True)
class WebSocketOptions:
    """Limits of the ``/v1/ws`` endpoint.

    Protocol pings are the server's (uvicorn's ``ws_ping_interval``/``ws_ping_timeout``):
    they find dead peers. ``idle_timeout_s`` closes a connection that sent nothing and had
    no request in flight for that long.
    """

    max_connections: int = option(
        256,
        name="--ws-max-connections",
        group="websocket",
        help="WebSocket connections at once; one more is closed with code 1013 (default: 256)",
    )
    max_requests_per_connection: int = option(
        128,
        name="--ws-max-requests",
        group="websocket",
        help="requests in flight on one WebSocket connection; one more gets an error "
        "message (default: 128)",
    )
    max_message_bytes: int = option(
        4 * 1024 * 1024,
        name="--ws-max-message-bytes",
        group="websocket",
        help="the largest WebSocket message taken; a larger one closes the connection with "
        "code 1009 (default: 4 MiB)",
    )
    idle_timeout_s: float = option(
        300.0,
        name="--ws-idle-timeout",
        group="websocket",
        help="seconds a WebSocket connection with nothing in flight may stay silent before "
        "it is closed (default: 300)",
    )

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_requests_per_connection", "max_message_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be more than 0, got {self.idle_timeout_s}")
