"""One streamed request to an OpenAI-compatible server, timed as vLLM's ``bench serve`` times it.

TTFT is the first chunk with a choice; each later chunk with a choice adds an inter-token
latency (a chunk may carry several tokens: the ITL is per chunk, as vLLM's); the latency
ends at the last chunk seen. ``completion_tokens`` from a chunk's usage is the output length
where the server sends one (in a chunk of its own, or with the last choice as llama-server
does: vLLM's client reads only the former); otherwise the caller counts the text's tokens.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class RequestInput:
    prompt: str
    prompt_len: int
    output_len: int
    model: str
    request_id: str = ""
    ignore_eos: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass
class RequestOutput:
    generated_text: str = ""
    success: bool = False
    latency: float = 0.0
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    prompt_len: int = 0
    error: str = ""
    start_time: float = 0.0


def payload(backend: str, request: RequestInput) -> dict[str, Any]:
    """The JSON body vLLM's request function sends for ``backend``."""
    body: dict[str, Any] = {"model": request.model, "stream": True}
    if backend == "openai-chat":
        body["messages"] = [{"role": "user", "content": request.prompt}]
        body["max_completion_tokens"] = request.output_len
    else:
        body["prompt"] = request.prompt
        body["max_tokens"] = request.output_len
    body["stream_options"] = {"include_usage": True}
    if request.ignore_eos:
        body["ignore_eos"] = True
    body.update(request.extra_body)
    return body


async def send(
    client: httpx.AsyncClient,
    url: str,
    backend: str,
    request: RequestInput,
    headers: dict[str, str] | None = None,
) -> RequestOutput:
    """POST ``request`` to ``url`` and read its event stream; failures are recorded, not raised."""
    out = RequestOutput(prompt_len=request.prompt_len)
    sent = dict(headers or {})
    if request.request_id:
        sent["x-request-id"] = request.request_id
    start = last = out.start_time = time.perf_counter()
    text: list[str] = []
    try:
        async with _opened(client, url, payload(backend, request), sent) as r:
            if r.status_code != 200:
                body = (await r.aread()).decode("utf-8", "replace")
                out.error = f"HTTP {r.status_code} {r.reason_phrase}: {body[:500]}"
                return out
            async for line in r.aiter_lines():
                data = line.removeprefix("data:").strip()
                if not line.startswith("data:") or data == "[DONE]":
                    continue
                chunk = json.loads(data)
                now = time.perf_counter()
                if choices := chunk.get("choices"):
                    if not text:
                        out.ttft = now - start
                    else:
                        out.itl.append(now - last)
                    text.append(_text(backend, choices[0]))
                    last = now
                # llama-server puts the usage in its last chunk with a choice; vLLM in its own.
                if usage := chunk.get("usage"):
                    out.output_tokens = usage.get("completion_tokens") or 0
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        return out
    out.generated_text = "".join(text)
    out.latency = last - start
    out.success = bool(text)
    if not text:
        out.error = "the stream held no chunk with a choice: no TTFT to measure"
    return out


@contextlib.asynccontextmanager
async def _opened(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[httpx.Response]:
    """The response's stream, sent again once where a kept-alive connection turned out closed
    before any response began (llama-server's closes one after its fifth request): the
    server never saw that request."""

    def post() -> httpx.Request:
        return client.build_request("POST", url, json=body, headers=headers)

    try:
        response = await client.send(post(), stream=True)
    except httpx.RemoteProtocolError as exc:
        if "without sending a response" not in str(exc):
            raise
        response = await client.send(post(), stream=True)
    try:
        yield response
    finally:
        await response.aclose()


def _text(backend: str, choice: dict[str, Any]) -> str:
    if backend != "openai-chat":
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    # Reasoning counts as output, as vLLM counts it.
    return delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""
