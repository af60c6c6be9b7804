"""`llmkit serve --grpc` (vLLM's gRPC engine service instead of HTTP, on --port) and
`--grpc-port N` (the service beside the HTTP app, over the same engine)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
from contextlib import AbstractAsyncContextManager
from types import FrameType
from typing import TYPE_CHECKING, Any

from llmkit.cli.serve.drain import DrainingServer

if TYPE_CHECKING:
    from llmkit.config import EngineConfig
    from llmkit.engine.protocol import EngineProtocol
    from llmkit.grpc import GrpcServer

logger = logging.getLogger("llmkit.grpc")


def add_grpc_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--grpc",
        action="store_true",
        help="serve vLLM's gRPC engine service (for the smg gateway) on --port instead of HTTP "
        "(extra: llmkit[grpc])",
    )
    group.add_argument(
        "--grpc-port",
        type=int,
        metavar="N",
        help="also serve vLLM's gRPC engine service on this port, beside HTTP, one engine",
    )


def grpc_server(
    engine: EngineProtocol,
    args: argparse.Namespace,
    port: int,
    name: str,
    keys: list[str] | None,
    config: EngineConfig | None,
) -> AbstractAsyncContextManager[GrpcServer]:
    """The gRPC server the flags ask for, not yet started."""
    try:
        from llmkit.grpc import serve_grpc
    except ImportError as exc:
        raise SystemExit(
            f'llmkit serve: error: gRPC needs the grpc extra (pip install "llmkit[grpc]"): {exc}'
        ) from None
    host = f"[{args.host}]" if ":" in args.host else args.host
    return serve_grpc(
        engine,
        f"{host}:{port}",
        served_model_name=(args.served_model_name or [name])[0],
        api_keys=keys or (),
        max_num_seqs=config.max_num_seqs if config else 0,
        block_size=config.block_size if config else 0,
        shutdown_grace=args.shutdown_timeout,
    )


def serve_grpc_only(
    server: AbstractAsyncContextManager[GrpcServer], engine: EngineProtocol
) -> None:
    """Run the engine and its gRPC server until SIGTERM or SIGINT, then drain."""

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        async with engine, server as running:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s")
            logger.info("llmkit gRPC engine service on port %d", running.port)
            await stop.wait()
            logger.info("draining the gRPC server")
            running.mark_draining()

    asyncio.run(run())


class GrpcBesideHTTP(DrainingServer):
    """The HTTP server, with the gRPC server started once the app (and the engine it owns)
    has, marked draining on the first signal, and drained before the engine stops."""

    def __init__(self, *args: Any, grpc: AbstractAsyncContextManager[GrpcServer]):
        super().__init__(*args)
        self._grpc = grpc
        self._running: GrpcServer | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._running = await self._grpc.__aenter__()
            logger.info("llmkit gRPC engine service on port %d", self._running.port)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._running is not None:
            self._running.mark_draining()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._running is not None:
            await self._grpc.__aexit__(None, None, None)
        await super().shutdown(sockets)
