"""``llmkit chat``: a conversation in the terminal, with a local engine or a running server."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, cast

from llmkit.cli.flags import (
    API_KEY_ENV,
    add_engine_flags,
    add_sampling_flags,
    engine_config,
    sampling_params,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam


def add_parser(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser("chat", help="chat in the terminal, locally or with a server")
    chat.add_argument(
        "model", nargs="?", help="a model directory or 'demo' (or, with --url, a served name)"
    )
    chat.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000/v1")
    chat.add_argument("--api-key", help=f"the server's API key (default: ${API_KEY_ENV})")
    chat.add_argument("--system", help="a system message to start the conversation")
    add_sampling_flags(chat, max_tokens=256)
    add_engine_flags(chat)
    chat.set_defaults(handler=chat_command)


def chat_command(args: argparse.Namespace) -> int:
    messages: list[dict[str, str]] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    if args.url:
        return _chat_remote(args, messages)
    if not args.model:
        raise SystemExit("llmkit chat: give a MODEL, or --url of a running server")
    return _chat_local(args, messages)


def _read_user_line() -> str | None:
    if sys.stdin.isatty():
        sys.stderr.write("> ")
        sys.stderr.flush()
    line = sys.stdin.readline()
    return None if not line or line.strip() in ("/exit", "/quit") else line.rstrip("\n")


def _chat_remote(args: argparse.Namespace, messages: list[dict[str, str]]) -> int:
    import openai

    url = args.url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or "none"
    client = openai.OpenAI(base_url=url, api_key=api_key)
    model = args.model or client.models.list().data[0].id
    while (line := _read_user_line()) is not None:
        messages.append({"role": "user", "content": line})
        stream = client.chat.completions.create(
            model=model,
            # Plain role/content dicts, which the client's TypedDicts describe.
            messages=cast("list[ChatCompletionMessageParam]", messages),
            stream=True,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            seed=args.sampling_seed,
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
                async for out in engine.chat(messages, sampling_params(args)):
                    for o in out.outputs:
                        reply.append(o.text)
                        sys.stdout.write(o.text)
                    sys.stdout.flush()
                sys.stdout.write("\n")
                messages.append({"role": "assistant", "content": "".join(reply)})

    anyio.run(chat)
    return 0
