"""Admission control under a burst, and 1,000 streams with clients leaving.

    python benchmarks/admission.py                 # the tiny test model (2 layers, hidden 64)
    python benchmarks/admission.py --model demo    # the demo model (8 layers, hidden 512)

Burst: a server holding 4 running and 8 queued requests (``--max-num-seqs 4
--max-queued-requests 8``) gets 36 completions at once (32 tokens each, greedy), ``--bursts``
times. It reports how many were admitted and refused, and the refusals' latency at p50 and
p99 as the client saw it and as the server's access log timed it, against the same burst of
``GET /livez`` (the cheapest answer the server gives) measured in the same run: the ratio
says what a refusal costs over a bare request.

Load: 1,000 concurrent streams (6 tokens each, 20 distinct prompts) on a server with
``--max-num-seqs 256``, first with every client reading to the end, then with 30% leaving at
random points; it reports wall time, tokens delivered to the streams that finished, the
ratio of the two runs, and the engine's state after each (it must be idle: nothing running
or waiting, no KV block in use).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import re
import tempfile
import time
from pathlib import Path

import httpx

from llmkit.bench.server import start_server
from llmkit.model.demo import ModelSpec, build_model

BURST, LOAD, TOKENS, LEAVING = 36, 1000, 6, 0.3
_ACCESS_503 = re.compile(rb"POST /v1/completions 503 ([0-9.]+)ms")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _burst(url: str, bursts: int) -> tuple[list[float], list[float], int, int]:
    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=BURST)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        await asyncio.gather(*(http.get("/livez") for _ in range(BURST)))

        async def timed(call):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            response = await call
            return response.status_code, (time.perf_counter() - start) * 1e3

        livez: list[float] = []
        refused: list[float] = []
        admitted = 0
        for b in range(bursts):
            results = await asyncio.gather(*(timed(http.get("/livez")) for _ in range(BURST)))
            livez += [ms for _, ms in results]
            body = {"max_tokens": 32, "temperature": 0, "ignore_eos": True}
            results = await asyncio.gather(
                *(
                    timed(http.post("/v1/completions", json={**body, "prompt": f"{b} {i}"}))
                    for i in range(BURST)
                )
            )
            refused += [ms for status, ms in results if status == 503]
            admitted += sum(status == 200 for status, _ in results)
    return livez, refused, admitted, len(refused)


async def _load(url: str, leaving: float, seed: int) -> tuple[float, int, int, dict[str, float]]:
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=LOAD, max_keepalive_connections=LOAD)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as http:

        async def client(i: int, leave_after: int | None) -> int:
            body = {"prompt": f"client {i % 20}", "max_tokens": TOKENS, "stream": True}
            body |= {"temperature": 0, "ignore_eos": True}
            tokens = 0
            async with http.stream("POST", "/v1/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if leave_after is not None and tokens >= leave_after:
                        return -1
                    if line.startswith("data: {"):
                        tokens += bool(json.loads(line[6:])["choices"][0]["text"])
            return TOKENS

        plan = [rng.randrange(TOKENS) if rng.random() < leaving else None for _ in range(LOAD)]
        start = time.perf_counter()
        done = await asyncio.gather(*(client(i, plan[i]) for i in range(LOAD)))
        elapsed = time.perf_counter() - start
        await asyncio.sleep(0.5)
        state = {
            line.split(" ")[0]: float(line.rsplit(" ", 1)[1])
            for line in (await http.get("/metrics")).text.splitlines()
            if line.startswith(("llmkit:num_requests_", "llmkit:kv_cache_usage_perc"))
        }
    finished = [d for d in done if d > 0]
    return elapsed, len(finished), sum(finished), state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a model directory or 'demo' (default: the tiny model)")
    parser.add_argument("--bursts", type=int, default=5, help="bursts to run (default: 5)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    model = args.model or str(build_model(tmp / "tiny", ModelSpec(architecture="llama")))
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; model {model}")

    with (tmp / "burst.log").open("wb") as log:
        flags = ["--max-num-seqs", "4", "--max-queued-requests", "8", "--max-model-len", "512"]
        proc, url = start_server(model, [*flags, "--log-level", "info"], log=log)
        try:
            livez, refused, admitted, n_refused = asyncio.run(_burst(url, args.bursts))
        finally:
            proc.terminate()
            proc.wait()
    server_ms = [float(m) for m in _ACCESS_503.findall((tmp / "burst.log").read_bytes())]
    print(f"\nburst: {args.bursts} x {BURST} completions: {admitted} admitted, {n_refused} refused")
    print("| answer | n | client p50 ms | client p99 ms | server p50 ms | server p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| GET /livez | {len(livez)} | {_pct(livez, 0.5):.1f} | {_pct(livez, 0.99):.1f} | | |")
    print(
        f"| 503 refusal | {len(refused)} | {_pct(refused, 0.5):.1f} | {_pct(refused, 0.99):.1f}"
        f" | {_pct(server_ms, 0.5):.2f} | {_pct(server_ms, 0.99):.2f} |"
    )
    print(f"refusal / livez at the client, p99: {_pct(refused, 0.99) / _pct(livez, 0.99):.2f}x")

    flags = ["--max-num-seqs", "256", "--max-model-len", "128", "--sse-keepalive-s", "0"]
    proc, url = start_server(model, [*flags, "--disable-uvicorn-access-log"])
    try:
        runs = {
            name: asyncio.run(_load(url, p, 14)) for name, p in (("all", 0.0), ("30%", LEAVING))
        }
    finally:
        proc.terminate()
        proc.wait()
    print(f"\nload: {LOAD} concurrent streams of {TOKENS} tokens")
    print("| clients leaving | seconds | finished | tokens/s to finished | engine after |")
    print("|---|---:|---:|---:|---|")
    for name, (elapsed, finished, tokens, state) in runs.items():
        idle = "idle" if not any(state.values()) else f"NOT idle {state}"
        print(
            f"| {name if name != 'all' else 'none'} | {elapsed:.1f} | {finished} | "
            f"{tokens / elapsed:.0f} | {idle} |"
        )
    ratio = runs["30%"][0] / runs["all"][0]
    print(f"wall time with 30% leaving / none: {ratio:.2f}x")


if __name__ == "__main__":
    main()
