"""llmkit workers behind the smg gateway (gRPC) against llmkit's own HTTP app, and two workers
behind smg against one.

    python benchmarks/grpc_gateway.py [--model demo] [--concurrency 1 16] [--output-len 64]

Starts `llmkit serve MODEL --grpc-port G` (the HTTP app and the gRPC service over one engine)
and smg in front of its gRPC port, and runs the same streaming completion workload through
both, taking turns (the engine is idle while the other side runs): the gateway's cost. Then
adds a second worker (`llmkit serve MODEL --grpc`) and a gateway over both (round robin):
two workers' throughput against one. Prints output tok/s and time to first token per level.
Needs `pip install smg 'llmkit[grpc]'`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import anyio
import httpx

from llmkit.bench.http_overhead import HttpLoad, best_levels, openai_client
from llmkit.bench.results import LevelResult
from llmkit.bench.server import start_server
from llmkit.bench.workload import add_stream_flags, machine, workload_of


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connects(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def wait_until(check, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, httpx.HTTPError):
            if check():
                return
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not come up in {timeout} s")


@contextlib.contextmanager
def process(command: list[str]) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def grpc_worker(model: str) -> Iterator[int]:
    """`llmkit serve MODEL --grpc` on a free port, once it accepts connections."""
    port = free_port()
    command = [sys.executable, "-m", "llmkit.cli", "serve", model, "--grpc", "--port", str(port)]
    with process([*command, "--log-level", "warning"]):
        wait_until(lambda: connects(port), "the gRPC worker")
        yield port


@contextlib.contextmanager
def gateway(grpc_ports: list[int]) -> Iterator[str]:
    """smg over the workers (round robin), once ready; its base URL."""
    port = free_port()
    command = ["smg", "launch", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
    command += ["--worker-urls", *(f"grpc://127.0.0.1:{p}" for p in grpc_ports)]
    command += ["--policy", "round_robin", "--worker-startup-check-interval", "1"]
    url = f"http://127.0.0.1:{port}"
    with process(command):
        wait_until(lambda: httpx.get(url + "/readiness").status_code == 200, "smg")
        yield url


def measure(urls: dict[str, str], args: argparse.Namespace) -> dict[str, list[LevelResult]]:
    workload = workload_of(args)
    prompts = workload.prompts(max(args.concurrency) * args.rounds)

    async def run() -> dict[str, list[LevelResult]]:
        async with contextlib.AsyncExitStack() as stack:
            loads = {}
            for side, url in urls.items():
                client = openai_client(url, None, max(args.concurrency))
                await stack.enter_async_context(client)
                model = (await client.models.list()).data[0].id
                loads[side] = HttpLoad(client, model, workload.output_len)
            return await best_levels(loads, args.concurrency, prompts, args.rounds, args.repeat)

    return anyio.run(run)


def report(best: dict[str, list[LevelResult]], baseline: str) -> None:
    sides = list(best)
    print("| streams | " + " | ".join(f"{s} tok/s | {s} TTFT p50 ms" for s in sides) + " | ratio |")
    print("|---:" * (2 * len(sides) + 2) + "|")
    for i, level in enumerate(best[baseline]):
        cells = " | ".join(
            f"{best[s][i].tokens_per_s:.1f} | {best[s][i].ttft_ms(0.5):.0f}" for s in sides
        )
        other = next(s for s in sides if s != baseline)
        ratio = best[other][i].tokens_per_s / level.tokens_per_s
        print(f"| {level.concurrency} | {cells} | {other} / {baseline} {ratio:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_stream_flags(parser)
    parser.set_defaults(concurrency=[1, 16], repeat=2, output_len=64)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"model {args.model}; {machine()}\n")
    grpc_port = free_port()
    proc, http_url = start_server(args.model, ["--grpc-port", str(grpc_port)])
    try:
        with gateway([grpc_port]) as one:
            print("The gateway against llmkit's own HTTP app (one engine):\n")
            report(measure({"http": http_url, "smg": one}, args), "http")
            with grpc_worker(args.model) as second, gateway([grpc_port, second]) as two:
                print("\nTwo workers behind smg against one:\n")
                report(measure({"smg-1": one, "smg-2": two}, args), "smg-1")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
