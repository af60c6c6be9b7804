"""The option objects of ``create_app`` that the HTTP app itself reads: who may call it
(``AccessOptions``) and how it treats requests (``HTTPOptions``). ``llmkit serve`` builds
them from flags of the same names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmkit.transports.http.body import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES


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

    api_key: str | Sequence[str] | None = None
    metrics_require_api_key: bool = False
    allowed_origins: Sequence[str] | None = None
    allowed_methods: Sequence[str] = ("*",)
    allowed_headers: Sequence[str] = ("*",)
    allow_credentials: bool = False

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

    max_request_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES
    request_body_timeout_s: float | None = DEFAULT_BODY_TIMEOUT_S
    sse_keepalive_s: float | None = 15.0
    enable_server_load_tracking: bool = False
    access_log: bool = True
    log_prompts: bool = False
    max_log_len: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_request_body_bytes", "request_body_timeout_s", "sse_keepalive_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
            if not value:
                object.__setattr__(self, name, None)
