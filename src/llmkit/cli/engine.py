"""``llmkit engine``: an engine without HTTP, served on a unix socket to other local processes."""

from __future__ import annotations

import argparse
import logging

from llmkit.cli.flags import add_engine_flags, engine_config

logger = logging.getLogger(__name__)


def add_parser(commands: argparse._SubParsersAction) -> None:
    engine = commands.add_parser(
        "engine",
        help="run an engine without HTTP, for `serve --engine-socket` and other local processes",
    )
    engine.add_argument("model", help="a model directory, a GGUF file, 'smollm2' or 'demo'")
    engine.add_argument(
        "--socket", required=True, metavar="PATH", help="the unix socket to serve the engine on"
    )
    engine.add_argument(
        "--socket-allow-uid",
        type=int,
        action="append",
        default=[],
        metavar="UID",
        help="also let this user id connect (repeatable); the engine's own user and root may",
    )
    engine.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the engine's log level (default: info)",
    )
    add_engine_flags(engine)
    engine.set_defaults(handler=engine_command)


def engine_command(args: argparse.Namespace) -> int:
    import signal

    import anyio

    from llmkit.engine.async_engine import AsyncEngine
    from llmkit.remote.unix.server import serve_unix

    config = engine_config(args.model, args)

    async def run() -> None:
        # The model loads before the socket exists, so a client that can connect is served.
        engine = AsyncEngine(config)
        async with engine, serve_unix(engine, args.socket, allow_uids=args.socket_allow_uid):
            logger.info("engine for %s serving on %s", args.model, args.socket)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    return

    anyio.run(run)
    return 0
