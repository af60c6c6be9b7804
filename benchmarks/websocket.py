"""WebSocket vs SSE vs AsyncEngine called directly: throughput, time to first token, ITL.

    python benchmarks/websocket.py                       # the demo model, 1/16/64 streams
    python benchmarks/websocket.py --concurrency 64 --repeat 5

Starts ``llmkit serve MODEL`` and an AsyncEngine of the same model in this process. At each
level, N concurrent clients each stream ``--rounds`` completions (random words,
``--output-len`` tokens with ignore_eos, greedy): over one WebSocket connection with
WebSocketClient (all N streams multiplexed on it), over HTTP with the official openai client
(SSE, a kept-alive connection per client), and on the AsyncEngine. The three sides
alternate ``--repeat`` times and each keeps its best run, as other processes may share the
machine.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import time

import anyio

from llmkit import AsyncEngine, EngineConfig
from llmkit.bench.http_overhead import DirectLoad, HttpLoad, Load, best_levels, openai_client
from llmkit.bench.results import LevelResult, RequestResult
from llmkit.bench.server import start_server
from llmkit.bench.workload import add_stream_flags, machine, workload_of
from llmkit.websocket import WebSocketClient


class WebSocketLoad:
    """Streaming completions multiplexed on one WebSocket connection."""

    def __init__(self, client: WebSocketClient, model: str, output_len: int):
        self.client = client
        self.body = {
            "model": model,
            "max_tokens": output_len,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }

    async def __call__(self, prompt: str) -> RequestResult:
        start = time.perf_counter()
        stamps: list[float] = []
        tokens = 0
        async for chunk in self.client.completions(prompt=prompt, **self.body):
            if chunk.choices:
                stamps.append(time.perf_counter())
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        return RequestResult(stamps[0] - start, gaps, tokens)


async def compare(args: argparse.Namespace, url: str) -> dict[str, list[LevelResult]]:
    prompts = workload_of(args).prompts(max(args.concurrency) * args.rounds)
    ws_url = url.replace("http://", "ws://") + "/v1/ws"
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(openai_client(url, None, max(args.concurrency)))
        model = (await http.models.list()).data[0].id
        ws = await stack.enter_async_context(WebSocketClient(ws_url))
        engine = await stack.enter_async_context(AsyncEngine(EngineConfig(args.model)))
        loads: dict[str, Load] = {
            "websocket": WebSocketLoad(ws, model, args.output_len),
            "sse": HttpLoad(http, model, args.output_len),
            "direct": DirectLoad(engine, args.output_len),
        }
        return await best_levels(loads, args.concurrency, prompts, args.rounds, args.repeat)


def report(args: argparse.Namespace, best: dict[str, list[LevelResult]]) -> str:
    lines = [
        f"model {args.model}; {args.input_words}-word prompts, {args.output_len} output tokens "
        f"(ignore_eos), {args.rounds} requests per client, best of {args.repeat}; {machine()}",
        "",
        "| streams | WS / SSE / direct out tok/s | WS / direct | SSE / direct "
        "| TTFT p50 ms WS / SSE / direct | WS ITL p50 / p99 ms | SSE ITL | direct ITL |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for ws, sse, direct in zip(best["websocket"], best["sse"], best["direct"], strict=True):
        tps = (ws.tokens_per_s, sse.tokens_per_s, direct.tokens_per_s)
        lines.append(
            f"| {ws.concurrency} | {tps[0]:.1f} / {tps[1]:.1f} / {tps[2]:.1f} "
            f"| {tps[0] / tps[2]:.2f} | {tps[1] / tps[2]:.2f} "
            f"| {ws.ttft_ms(0.5):.1f} / {sse.ttft_ms(0.5):.1f} / {direct.ttft_ms(0.5):.1f} "
            + "".join(f"| {r.itl_ms(0.5):.1f} / {r.itl_ms(0.99):.1f} " for r in (ws, sse, direct))
            + "|"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_stream_flags(parser)
    args = parser.parse_args()
    proc, url = start_server(args.model, [])
    try:
        best = anyio.run(compare, args, url)
    finally:
        proc.terminate()
        proc.wait(30)
    print(report(args, best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
