"""Several chats streamed at once over one WebSocket connection, and one cancelled early.

Start a server, then run this against it::

    llmkit serve demo
    python examples/websocket_chat.py ws://127.0.0.1:8000/v1/ws [API_KEY]

A browser talks to the same endpoint (``llmkit serve`` also serves a chat page at ``/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from llmkit.websocket import WebSocketClient


async def chat(client: WebSocketClient, name: str, question: str) -> None:
    messages = [{"role": "user", "content": question}]
    async for chunk in client.chat(messages=messages, max_tokens=24, temperature=0):
        for choice in chunk.choices:
            if choice.delta.content:
                print(f"[{name}] {choice.delta.content!r}", flush=True)
            if choice.finish_reason:
                print(f"[{name}] finished: {choice.finish_reason}", flush=True)


async def first_words(client: WebSocketClient, question: str) -> None:
    """Read two chunks and leave: leaving the loop cancels the request on the server."""
    messages = [{"role": "user", "content": question}]
    stream = client.chat(messages=messages, max_tokens=500)
    async with contextlib.aclosing(stream):
        seen = 0
        async for _chunk in stream:
            seen += 1
            if seen == 2:
                break
    print("[c] cancelled after 2 chunks", flush=True)


async def main(url: str, api_key: str | None) -> None:
    async with WebSocketClient(url, api_key=api_key) as client:
        await asyncio.gather(
            chat(client, "a", "Tell me about rivers"),
            chat(client, "b", "Write a haiku"),
            first_words(client, "Count to a thousand"),
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
