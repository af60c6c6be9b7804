"""``llmkit serve``: the OpenAI-compatible HTTP server, draining in-flight requests on SIGTERM."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import uvicorn

from llmkit.cli.flags import API_KEY_ENV, add_engine_flags, engine_config, engine_kwargs
from llmkit.cli.options import from_flags
from llmkit.cli.serve.drain import DrainingServer
from llmkit.cli.serve.grpc import GrpcBesideHTTP, add_grpc_flags, grpc_server, serve_grpc_only
from llmkit.cli.serve.listen import bind_sockets, listen
from llmkit.cli.serve.models import add_models_flags, model_manager
from llmkit.cli.serve.server_flags import ProcessOptions, add_server_flags
from llmkit.cli.serve.setup import app_options, apply_log_config, uvicorn_settings

if TYPE_CHECKING:
    from llmkit.config import EngineConfig
    from llmkit.engine.protocol import EngineProtocol
    from llmkit.lora_request import LoRARequest


def add_parser(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="run the OpenAI-compatible HTTP server")
    serve.add_argument(
        "model",
        nargs="?",
        help="a model directory, a GGUF file, 'smollm2' or 'demo' (none with --engine-socket)",
    )
    serve.add_argument(
        "--engine-socket",
        metavar="PATH",
        help="serve the engine `llmkit engine MODEL --socket PATH` runs, loading no model here",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=int, default=8000, help="the port to listen on (default: 8000)"
    )
    serve.add_argument("--uds", help="listen on this unix socket instead of host:port")
    serve.add_argument("--root-path", default="", help="the path prefix a proxy serves this under")
    serve.add_argument("--served-model-name", nargs="+", help="the model name(s) clients use")
    add_server_flags(serve)
    serve.add_argument(
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="on SIGTERM, seconds to let in-flight requests finish (default: 30)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the server's log level (default: info)",
    )
    add_models_flags(serve)
    add_grpc_flags(serve)
    add_engine_flags(serve)
    serve.set_defaults(handler=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    from llmkit.transports.app import create_app

    keys = args.api_key or ([os.environ[API_KEY_ENV]] if os.environ.get(API_KEY_ENV) else None)
    # Every flag is checked before the model loads, so a typo costs no loading time.
    process = from_flags(ProcessOptions, args)
    if process.log_config_file:
        apply_log_config(process.log_config_file)
    options = app_options(args, keys)
    uvicorn_extra = uvicorn_settings(process, options.websocket.max_message_bytes)
    manager = model_manager(args)
    if manager is not None and (args.grpc or args.grpc_port is not None):
        raise SystemExit("llmkit serve: error: several models are served over HTTP only, not gRPC")
    engine_settings = None if manager is not None else _engine_settings(args)
    if args.grpc or args.grpc_port is not None:
        # grpc binds its own socket: a busy port is found here, before the model loads.
        for sock in bind_sockets(args.host, args.port if args.grpc else args.grpc_port, None):
            sock.close()
    if args.grpc:
        engine, name = _served_engine(args, engine_settings)
        grpc_only = grpc_server(engine, args, args.port, name, keys, engine_settings)
        _freeze_startup_heap()
        serve_grpc_only(grpc_only, engine)
        _exit_without_teardown()
    # Bound before the model loads, so a busy port fails at once (a failure from here on
    # ends the process, which closes them; uvicorn closes them when it stops).
    sockets = bind_sockets(args.host, args.port, args.uds)
    if manager is None:
        engine, name = _served_engine(args, engine_settings)
        _check_loras(engine, options.lora_modules, args.served_model_name or [name])
    app = create_app(
        engine if manager is None else manager,
        options,
        served_model_name=args.served_model_name or ([name] if manager is None else None),
        owns_engine=True,
    )
    log_config: dict[str, Any] | None = uvicorn.config.LOGGING_CONFIG
    log_level = process.uvicorn_log_level or args.log_level
    if process.log_config_file:
        # Applied before the model loaded; uvicorn's default config would replace it.
        log_config, log_level = None, process.uvicorn_log_level
    server_config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        uds=args.uds,
        root_path=args.root_path,
        access_log=False,  # the app logs each request with its id
        timeout_graceful_shutdown=args.shutdown_timeout,
        lifespan="on",
        log_config=log_config,
        log_level=log_level,
        **uvicorn_extra,
    )
    _freeze_startup_heap()
    listen(sockets, server_config.backlog)
    state = (server_config, app.state.serving, app.state.load)
    if args.grpc_port is None:
        DrainingServer(*state).run(sockets)
    else:
        grpc = grpc_server(engine, args, args.grpc_port, name, keys, engine_settings)
        GrpcBesideHTTP(*state, grpc=grpc).run(sockets)
    _exit_without_teardown()


def _freeze_startup_heap() -> None:
    """Leave what starting made (the imports; a single model's engine) out of the garbage
    collector's full collections, which walk every object they track: a fifth of a second
    in this process, which each model a manager loads (thousands of new objects) would
    otherwise set off every other load. vLLM's server does the same."""
    gc.collect()
    gc.freeze()


def _exit_without_teardown() -> NoReturn:
    """Exit now that the server has stopped and the engine is shut down: the exit handlers
    run (logs are flushed), but the interpreter's teardown of torch and the model, which
    takes most of a second, is skipped, so the process ends within its shutdown deadline."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _engine_settings(args: argparse.Namespace) -> EngineConfig | None:
    """The engine flags checked (the config of the engine to load; None with
    --engine-socket), before the port is bound."""
    if args.engine_socket is None:
        if not args.model:
            raise SystemExit("llmkit serve: error: give a MODEL, or --engine-socket PATH")
        return engine_config(args.model, args)
    if args.data_parallel_size > 1 or args.ray_address:
        raise SystemExit(
            "llmkit serve: error: replicas (--data-parallel-size, --ray-address) run their own "
            "engines; they do not go with --engine-socket"
        )
    if args.model or engine_kwargs(args):
        raise SystemExit(
            "llmkit serve: error: with --engine-socket the model and its engine flags belong to "
            "`llmkit engine`"
        )
    return None


def _served_engine(
    args: argparse.Namespace, config: EngineConfig | None
) -> tuple[EngineProtocol, str]:
    """The engine to serve (loaded, or reached at --engine-socket), and its model's name."""
    from llmkit.remote.placement import create_engine

    if config is not None:
        # The model loads before the port listens, so a client that can connect can be served.
        engine = create_engine(
            config, data_parallel_size=args.data_parallel_size, ray_address=args.ray_address
        )
        return engine, args.model
    import anyio

    from llmkit.remote.unix.connect import fetch_model_info

    try:
        info = anyio.run(fetch_model_info, args.engine_socket)
    except OSError as exc:
        raise SystemExit(
            f"llmkit serve: error: cannot reach the engine at {args.engine_socket}: {exc}"
        ) from None
    return create_engine(engine_socket=args.engine_socket), info.name


def _check_loras(engine: EngineProtocol, loras: Sequence[LoRARequest], names: list[str]) -> None:
    """Each adapter read and checked against the loaded model, before the port opens."""
    import anyio

    for lora in loras:
        if lora.name in names:
            raise SystemExit(f"llmkit: error: --lora-modules: {lora.name!r} is the model's name")
        try:
            anyio.run(engine.add_lora, lora)
        except ValueError as exc:
            raise SystemExit(f"llmkit: error: --lora-modules: {exc}") from None
