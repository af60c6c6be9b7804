"""``llmkit serve``'s deployment flags, under vLLM's names: the app's options (AppOptions and
the option classes in it) and the process's own (ProcessOptions: TLS, WebSocket pings,
replicas, logging), each a field that declares its flag, and the ``--help`` sections."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal

from llmkit.cli.options import add_option_flags
from llmkit.config.option import option
from llmkit.transports.options import AppOptions

# The --help sections, in their order, by the keys the fields' ``group`` names.
GROUPS = {
    "tls": "TLS",
    "server": "server",
    "websocket": "WebSocket (/v1/ws)",
    "limits": "per-key limits (429 over a limit)",
    "replicas": "replicas on Ray (pip install 'llmkit[ray]')",
    "lora": "LoRA adapters (with --enable-lora)",
    "logging": "logging",
    "plugins": "tools and reasoning (plugins: `llmkit plugins`)",
    "media": "image inputs (closed by default: data: URLs only)",
    "answers": "answers",
}


@dataclass(frozen=True)
class ProcessOptions:
    """What the server process does around the app: uvicorn's TLS and WebSocket settings
    (named as uvicorn's), the engine replicas, the logging setup."""

    ssl_keyfile: str | None = option(
        None, group="tls", metavar="PATH", help="the PEM private key; serves HTTPS"
    )
    ssl_certfile: str | None = option(
        None,
        group="tls",
        metavar="PATH",
        help="the PEM certificate (chain) for --ssl-keyfile",
    )
    ssl_ca_certs: str | None = option(
        None,
        group="tls",
        metavar="PATH",
        help="PEM CA certificates that client certificates are checked against",
    )
    ssl_cert_reqs: Literal[0, 1, 2] = option(
        0,
        group="tls",
        help="client certificates: 0 not asked for, 1 optional, 2 required (Python's "
        "ssl.CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED; default: 0)",
    )
    ws_per_message_deflate: bool = option(
        False,
        name="--ws-compression",
        group="websocket",
        help="offer permessage-deflate: less bandwidth for slow links, more server CPU per "
        "message (default: off; token chunks are small and the CPU is the engine's)",
    )
    ws_ping_interval: float = option(
        20.0, group="websocket", help="seconds between the server's WebSocket pings (default: 20)"
    )
    ws_ping_timeout: float = option(
        20.0,
        group="websocket",
        help="seconds to wait for a pong before dropping the connection and aborting its "
        "requests (default: 20)",
    )
    data_parallel_size: int = option(
        1,
        group="replicas",
        metavar="N",
        help="serve N engine replicas, each a Ray actor, routed by load and shared prompt "
        "prefix (default: 1, this process's engine)",
    )
    ray_address: str | None = option(
        None,
        group="replicas",
        metavar="ADDR",
        help="the Ray cluster the replicas run on (its GCS address, or 'auto'); default: a "
        "local cluster started for the server",
    )
    log_config_file: str | None = option(
        None,
        group="logging",
        metavar="PATH",
        help="a JSON logging.config.dictConfig for the server's logs, applied before the "
        "model loads",
    )
    uvicorn_log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] | None = (
        option(
            None,
            group="logging",
            help="uvicorn's own log level (default: --log-level, or the --log-config-file's)",
        )
    )

    def __post_init__(self) -> None:
        for name in ("ws_ping_interval", "ws_ping_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be more than 0, got {getattr(self, name)}")
        if self.data_parallel_size < 1:
            raise ValueError(f"data_parallel_size must be >= 1, got {self.data_parallel_size}")


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """The flags a `vllm serve` deployment passes, with the same names and meanings."""
    add_option_flags(parser, GROUPS, AppOptions, ProcessOptions)
