"""The option objects of ``create_app`` that the HTTP app itself reads: who may call it
(``AccessOptions``) and how it treats requests (``HTTPOptions``); each field declares the
``llmkit serve`` flag that sets it."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

from llmkit.config.option import option
from llmkit.transports.http.body import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES


def _split(values: list[str]) -> list[str] | None:
    """Repeated and comma-separated values, one list (None: none)."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()] or None


@dataclass(frozen=True)
class AccessOptions:
    """Who may call the app.

    Parameters:

    * ``api_key``: one key or several, required on every route but the probes,
      ``/openapi.json`` and the chat page (and ``/metrics`` and ``/load`` unless
      ``metrics_require_api_key``); the WebSocket takes the same keys. None: no key.
    * ``metrics_require_api_key``: ``/metrics`` and ``/load`` need a key too.
    * ``allowed_origins``: turns on CORS for these origins; from browsers, the WebSocket
      takes only these (or, with none, the page's own).
    * ``allowed_methods``, ``allowed_headers``, ``allow_credentials``: CORS's other settings.
    """

    api_key: str | Sequence[str] | None = option(
        None, action="append", help="require this key (repeatable; or set LLMKIT_API_KEY)"
    )
    metrics_require_api_key: bool = option(False, help="protect /metrics too")
    allowed_origins: Sequence[str] | None = option(
        None,
        action="append",
        parse=_split,
        help="CORS origins (repeatable or comma-separated)",
    )
    allowed_methods: Sequence[str] = option(
        ("*",), action="append", parse=_split, help="CORS methods (default: all)"
    )
    allowed_headers: Sequence[str] = option(
        ("*",), action="append", parse=_split, help="CORS headers (default: all)"
    )
    allow_credentials: bool = option(False, help="CORS: allow credentials")

    @property
    def keys(self) -> list[str]:
        return [self.api_key] if isinstance(self.api_key, str) else list(self.api_key or [])


@dataclass(frozen=True)
class HTTPOptions:
    """How the app treats each request. 0 turns a limit off, as None does.

    Parameters:

    * ``max_request_body_bytes``: larger bodies get 413, images included (default 16 MiB).
    * ``request_body_timeout_s``: a body not read this long after the request began gets
      408 (default 30 s).
    * ``sse_keepalive_s``: the idle time after which a stream gets a keep-alive comment
      line (default 15 s).
    * ``enable_server_load_tracking``: ``GET /load`` counts the POST requests in flight
      (else it reports 0).
    * ``access_log``: one log line per request (status, time, request id; never prompts).
    * ``log_prompts``: prompts in the request log, cut to ``max_log_len`` characters.
    """

    max_request_body_bytes: int | None = option(
        DEFAULT_MAX_BODY_BYTES,
        group="server",
        metavar="BYTES",
        help="answer 413 to a larger request body, images included; 0: no limit "
        f"(default: {DEFAULT_MAX_BODY_BYTES}, 16 MiB)",
    )
    request_body_timeout_s: float | None = option(
        DEFAULT_BODY_TIMEOUT_S,
        group="server",
        metavar="SECONDS",
        help="answer 408 to a request whose body has not arrived this long after it began; "
        f"0: no limit (default: {DEFAULT_BODY_TIMEOUT_S:g})",
    )
    sse_keepalive_s: float | None = option(
        15.0,
        group="server",
        metavar="SECONDS",
        help="send a comment line on a stream idle this long (queued or in a long prefill), "
        "so proxies keep it open; 0 never does (default: 15)",
    )
    enable_server_load_tracking: bool = option(
        False,
        group="server",
        help='count requests in flight for GET /load ({"server_load": N}); else /load says 0',
    )
    access_log: bool = option(
        True,
        name="--disable-uvicorn-access-log",
        group="logging",
        parse=operator.not_,
        help="drop the access log line of each request (prompts are never in it)",
    )
    log_prompts: bool = option(False, help="log prompts (off by default)")
    max_log_len: int | None = option(None, help="cut logged prompts to this many characters")

    def __post_init__(self) -> None:
        for name in ("max_request_body_bytes", "request_body_timeout_s", "sse_keepalive_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
            if not value:
                object.__setattr__(self, name, None)
