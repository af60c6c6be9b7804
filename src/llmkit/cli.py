"""The ``llmkit`` command: serve | engine | run | chat | demo-model | bench."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from llmkit.engine_args import add_engine_flags, engine_config, engine_kwargs

if TYPE_CHECKING:
    from llmkit.engine.protocol import EngineProtocol
    from llmkit.serving.context import ServingContext

# The only place llmkit reads an environment variable for a setting (see DESIGN.md).
API_KEY_ENV = "LLMKIT_API_KEY"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(args, "log_level", "warning").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.handler(args) or 0
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmkit", description="Serve and run LLMs with llmkit.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the OpenAI-compatible HTTP server")
    serve.add_argument("model", nargs="?", help="a model directory, or 'demo' (none with --engine-socket)")
    serve.add_argument(
        "--engine-socket", metavar="PATH",
        help="serve the engine that `llmkit engine MODEL --socket PATH` runs, loading no model here",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--uds", help="listen on this unix socket instead of host:port")
    serve.add_argument("--root-path", default="", help="the path prefix a proxy serves this under")
    serve.add_argument("--served-model-name", nargs="+", help="the model name(s) clients use")
    serve.add_argument(
        "--api-key", action="append",
        help=f"require this key (repeatable; or set {API_KEY_ENV})",
    )
    serve.add_argument("--metrics-require-api-key", action="store_true", help="protect /metrics too")
    serve.add_argument("--chat-template", help="a chat template file, or the template itself")
    serve.add_argument("--allowed-origins", action="append", help="CORS origins (repeatable or comma-separated)")
    serve.add_argument("--allowed-methods", action="append", help="CORS methods (default: all)")
    serve.add_argument("--allowed-headers", action="append", help="CORS headers (default: all)")
    serve.add_argument("--allow-credentials", action="store_true", help="CORS: allow credentials")
    serve.add_argument("--log-prompts", action="store_true", help="log prompts (off by default)")
    serve.add_argument("--max-log-len", type=int, help="cut logged prompts to this many characters")
    serve.add_argument(
        "--shutdown-timeout", type=float, default=30.0,
        help="on SIGTERM, seconds to let in-flight requests finish (default: 30)",
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    add_engine_flags(serve)
    serve.set_defaults(handler=_serve)

    engine = commands.add_parser(
        "engine", help="run an engine without HTTP, for `serve --engine-socket` and other local processes"
    )
    engine.add_argument("model", help="a model directory, or 'demo'")
    engine.add_argument("--socket", required=True, metavar="PATH", help="the unix socket to serve on")
    engine.add_argument(
        "--socket-allow-uid", type=int, action="append", default=[], metavar="UID",
        help="also let this user id connect (repeatable); the engine's own user and root always may",
    )
    engine.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="how much to log"
    )
    add_engine_flags(engine)
    engine.set_defaults(handler=_engine)

    run = commands.add_parser("run", help="stream one completion to stdout")
    run.add_argument("model", help="a model directory, or 'demo'")
    run.add_argument("prompt")
    _add_sampling_flags(run, max_tokens=128)
    add_engine_flags(run)
    run.set_defaults(handler=_run)

    chat = commands.add_parser("chat", help="chat in the terminal, locally or with a server")
    chat.add_argument("model", nargs="?", help="a model directory or 'demo' (or, with --url, a served name)")
    chat.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000/v1")
    chat.add_argument("--api-key", help=f"the server's API key (default: ${API_KEY_ENV})")
    chat.add_argument("--system", help="a system message to start the conversation")
    _add_sampling_flags(chat, max_tokens=256)
    add_engine_flags(chat)
    chat.set_defaults(handler=_chat)

    demo = commands.add_parser("demo-model", help="build the random-weight demo model")
    demo.add_argument("path", type=Path)
    demo.add_argument("--tiny", action="store_true", help="the 2-layer test size instead")
    demo.set_defaults(handler=_demo_model)

    bench = commands.add_parser("bench", help="benchmarks")
    from llmkit import bench as bench_module

    bench_module.add_commands(bench.add_subparsers(dest="bench", required=True, metavar="BENCH"))
    return parser


def _add_sampling_flags(parser: argparse.ArgumentParser, max_tokens: int) -> None:
    group = parser.add_argument_group("sampling")
    group.add_argument("--max-tokens", type=int, default=max_tokens)
    group.add_argument("--temperature", type=float, default=0.7)
    group.add_argument("--top-p", type=float, default=1.0)
    group.add_argument("--sampling-seed", type=int, help="the request's sampling seed")


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _read_template(value: str | None) -> str | None:
    if value is None:
        return None
    path = Path(value)
    return path.read_text() if path.is_file() else value


# ---- serve ------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from llmkit.transports.http import create_app

    keys = args.api_key or ([os.environ[API_KEY_ENV]] if os.environ.get(API_KEY_ENV) else None)
    engine, name = _served_engine(args)
    app = create_app(
        engine,
        served_model_name=args.served_model_name or [name],
        api_key=keys,
        allowed_origins=_split(args.allowed_origins),
        allowed_methods=_split(args.allowed_methods) or ["*"],
        allowed_headers=_split(args.allowed_headers) or ["*"],
        allow_credentials=args.allow_credentials,
        chat_template=_read_template(args.chat_template),
        log_prompts=args.log_prompts,
        max_log_len=args.max_log_len,
        metrics_require_api_key=args.metrics_require_api_key,
        owns_engine=True,
    )
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        uds=args.uds,
        root_path=args.root_path,
        log_level=args.log_level,
        access_log=False,  # the app logs each request with its id
        timeout_graceful_shutdown=args.shutdown_timeout,
        lifespan="on",
    )
    _DrainingServer(config, app.state.serving).run()
    return 0


def _served_engine(args: argparse.Namespace) -> tuple[EngineProtocol, str]:
    """The engine ``serve`` fronts, and its model's name."""
    if args.engine_socket is None:
        if not args.model:
            raise SystemExit("llmkit serve: error: give a MODEL, or --engine-socket PATH")
        from llmkit.engine.async_engine import AsyncEngine

        # The model loads before the port opens, so a client that can connect can be served.
        return AsyncEngine(engine_config(args.model, args)), args.model
    if args.model or engine_kwargs(args):
        raise SystemExit(
            "llmkit serve: error: with --engine-socket the model and its engine flags belong to "
            "`llmkit engine`"
        )
    import anyio

    from llmkit.transports.unix_client import EngineClient, fetch_model_info

    try:
        info = anyio.run(fetch_model_info, args.engine_socket)
    except OSError as exc:
        raise SystemExit(f"llmkit serve: error: cannot reach the engine at {args.engine_socket}: {exc}") from None
    return EngineClient(args.engine_socket), info.name


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, marking the app as draining as soon as a shutdown signal comes.

    uvicorn then stops accepting, waits up to ``timeout_graceful_shutdown`` for in-flight
    requests, cancels the rest (which aborts them) and runs the lifespan's shutdown.
    """

    def __init__(self, config: uvicorn.Config, serving: ServingContext):
        super().__init__(config)
        self._serving = serving

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._serving.draining = True
        super().handle_exit(sig, frame)


# ---- engine ---------------------------------------------------------------------------------


def _engine(args: argparse.Namespace) -> int:
    import signal

    import anyio

    from llmkit.engine.async_engine import AsyncEngine
    from llmkit.transports.unix import serve_unix

    config = engine_config(args.model, args)

    async def run() -> None:
        # The model loads before the socket exists, so a client that can connect can be served.
        engine = AsyncEngine(config)
        async with engine, serve_unix(engine, args.socket, allow_uids=args.socket_allow_uid):
            logging.getLogger("llmkit.cli").info("engine for %s serving on %s", args.model, args.socket)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    return

    anyio.run(run)
    return 0


# ---- run and chat -------------------------------------------------------------------------


def _sampling(args: argparse.Namespace):
    from llmkit.sampling_params import RequestOutputKind, SamplingParams

    return SamplingParams(
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.sampling_seed,
        output_kind=RequestOutputKind.DELTA,
    )


def _run(args: argparse.Namespace) -> int:
    import anyio

    from llmkit.engine.async_engine import AsyncEngine

    async def run() -> None:
        async with AsyncEngine(engine_config(args.model, args)) as engine:
            async for out in engine.generate(args.prompt, _sampling(args)):
                for o in out.outputs:
                    sys.stdout.write(o.text)
                sys.stdout.flush()
        sys.stdout.write("\n")

    anyio.run(run)
    return 0


def _read_user_line() -> str | None:
    if sys.stdin.isatty():
        sys.stderr.write("> ")
        sys.stderr.flush()
    line = sys.stdin.readline()
    return None if not line or line.strip() in ("/exit", "/quit") else line.rstrip("\n")


def _chat(args: argparse.Namespace) -> int:
    messages: list[dict[str, str]] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    if args.url:
        return _chat_remote(args, messages)
    if not args.model:
        raise SystemExit("llmkit chat: give a MODEL, or --url of a running server")
    return _chat_local(args, messages)


def _chat_remote(args: argparse.Namespace, messages: list[dict[str, str]]) -> int:
    import openai

    url = args.url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    client = openai.OpenAI(base_url=url, api_key=args.api_key or os.environ.get(API_KEY_ENV) or "none")
    model = args.model or client.models.list().data[0].id
    while (line := _read_user_line()) is not None:
        messages.append({"role": "user", "content": line})
        stream = client.chat.completions.create(
            model=model, messages=messages, stream=True, max_tokens=args.max_tokens,
            temperature=args.temperature, top_p=args.top_p, seed=args.sampling_seed,
        )
        reply = []
        for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    reply.append(choice.delta.content)
                    sys.stdout.write(choice.delta.content)
                    sys.stdout.flush()
        sys.stdout.write("\n")
        messages.append({"role": "assistant", "content": "".join(reply)})
    return 0


def _chat_local(args: argparse.Namespace, messages: list[dict[str, str]]) -> int:
    import anyio

    from llmkit.engine.async_engine import AsyncEngine

    async def chat() -> None:
        async with AsyncEngine(engine_config(args.model, args)) as engine:
            while (line := await anyio.to_thread.run_sync(_read_user_line)) is not None:
                messages.append({"role": "user", "content": line})
                reply = []
                async for out in engine.chat(messages, _sampling(args)):
                    for o in out.outputs:
                        reply.append(o.text)
                        sys.stdout.write(o.text)
                    sys.stdout.flush()
                sys.stdout.write("\n")
                messages.append({"role": "assistant", "content": "".join(reply)})

    anyio.run(chat)
    return 0


# ---- demo-model ---------------------------------------------------------------------------


def _demo_model(args: argparse.Namespace) -> int:
    from llmkit.model.demo import DEMO_SPEC, ModelSpec, build_model

    print(build_model(args.path, ModelSpec() if args.tiny else DEMO_SPEC))
    return 0


if __name__ == "__main__":
    sys.exit(main())
