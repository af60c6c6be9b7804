"""The unix-socket transport against AsyncEngine called directly: throughput and added latency.

    python benchmarks/unix.py                            # the demo model, 1/16/64 streams
    python benchmarks/unix.py --concurrency 64 --repeat 5

Starts ``llmkit engine MODEL --socket PATH`` in a process of its own and an AsyncEngine of
the same config in this one. At each level, N concurrent clients each stream ``--rounds``
requests (random words, ``--output-len`` tokens with ignore_eos, greedy, DELTA outputs)
through an EngineClient, then the same requests through the AsyncEngine; the two sides
alternate ``--repeat`` times and each keeps its best run, as other processes may share the
machine. It reports output tokens/s and their ratio; the time per output token as a reader
sees it (an output's gap since the previous one, over its tokens) at p50 and p99, with
what the transport adds to it; and the CPU time the two processes spent per output token
(from /proc, so Linux only), which other jobs on the machine disturb far less than wall
time.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from llmkit import AsyncEngine, EngineConfig, RequestOutputKind, SamplingParams
from llmkit.bench.workload import add_stream_flags, machine, workload_of
from llmkit.unix import EngineClient


@dataclass
class Level:
    """One run of one side at one concurrency."""

    concurrency: int
    elapsed: float = 0.0
    cpu: float = 0.0  # seconds of CPU, this process and the engine's together
    tokens: int = 0
    per_token: list[float] = field(default_factory=list)  # seconds, one sample per token

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.elapsed

    @property
    def cpu_ms_per_token(self) -> float:
        return self.cpu / self.tokens * 1e3

    def per_token_ms(self, q: float) -> float:
        quantiles = statistics.quantiles(self.per_token, n=100, method="inclusive")
        return quantiles[int(q * 100) - 1] * 1e3


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of the processes so far, all their threads together."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


async def run_level(
    engine,
    concurrency: int,
    prompts: list[str],
    rounds: int,
    params: SamplingParams,
    pids: list[int],
) -> Level:
    level = Level(concurrency)

    async def request(prompt: str) -> None:
        last = None
        async for out in engine.generate(prompt, params):
            now = time.perf_counter()
            tokens = sum(len(o.token_ids) for o in out.outputs)
            if tokens and last is not None:
                level.per_token.extend([(now - last) / tokens] * tokens)
            if tokens:
                last = now
            level.tokens += tokens

    async def client(worker: int) -> None:
        for r in range(rounds):
            await request(prompts[(worker * rounds + r) % len(prompts)])

    start, cpu = time.perf_counter(), cpu_seconds(pids)
    async with anyio.create_task_group() as tg:
        for worker in range(concurrency):
            tg.start_soon(client, worker)
    level.elapsed = time.perf_counter() - start
    level.cpu = cpu_seconds(pids) - cpu
    return level


def start_engine(model: str, path: Path, timeout: float = 300.0) -> subprocess.Popen:
    command = [sys.executable, "-m", "llmkit.cli", "engine", model, "--socket", str(path)]
    proc = subprocess.Popen([*command, "--log-level", "warning"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llmkit engine exited with {proc.returncode}")
        with socket.socket(socket.AF_UNIX) as probe:
            if probe.connect_ex(str(path)) == 0:
                return proc
        time.sleep(0.2)
    proc.kill()
    raise TimeoutError("llmkit engine did not start in time")


async def compare(
    args: argparse.Namespace, path: Path, pids: list[int]
) -> list[tuple[Level, Level]]:
    prompts = workload_of(args).prompts(max(args.concurrency) * args.rounds)
    params = SamplingParams(
        max_tokens=args.output_len,
        temperature=0.0,
        ignore_eos=True,
        output_kind=RequestOutputKind.DELTA,
    )
    results = []
    async with AsyncEngine(EngineConfig(args.model)) as direct, EngineClient(path) as remote:
        sides = {"unix": remote, "direct": direct}
        for engine in sides.values():  # warm up
            await run_level(engine, 1, prompts, 1, params, pids)
        for concurrency in args.concurrency:
            runs: dict[str, list[Level]] = {side: [] for side in sides}
            for _ in range(args.repeat):
                for side, engine in sides.items():
                    level = await run_level(engine, concurrency, prompts, args.rounds, params, pids)
                    runs[side].append(level)
            best = {
                side: max(levels, key=lambda lv: lv.tokens_per_s) for side, levels in runs.items()
            }
            results.append((best["unix"], best["direct"]))
    return results


def report(args: argparse.Namespace, results: list[tuple[Level, Level]]) -> str:
    lines = [
        f"model {args.model}; {args.input_words}-word prompts, {args.output_len} output tokens, "
        f"{args.rounds} requests per client, best of {args.repeat}; {machine()}",
        "",
        "| streams | unix out tok/s | direct out tok/s | unix / direct | unix ms/token p50 / p99 "
        "| direct ms/token p50 / p99 | added p50 / p99 ms | CPU ms/token unix / direct |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for unix, direct in results:
        p50 = (unix.per_token_ms(0.5), direct.per_token_ms(0.5))
        p99 = (unix.per_token_ms(0.99), direct.per_token_ms(0.99))
        lines.append(
            f"| {unix.concurrency} | {unix.tokens_per_s:.1f} | {direct.tokens_per_s:.1f} | "
            f"{unix.tokens_per_s / direct.tokens_per_s:.2f} | {p50[0]:.2f} / {p99[0]:.2f} | "
            f"{p50[1]:.2f} / {p99[1]:.2f} | {p50[0] - p50[1]:+.2f} / {p99[0] - p99[1]:+.2f} | "
            f"{unix.cpu_ms_per_token:.2f} / {direct.cpu_ms_per_token:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_stream_flags(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "engine.sock"
        engine = start_engine(args.model, path)
        try:
            results = anyio.run(compare, args, path, [os.getpid(), engine.pid])
        finally:
            engine.terminate()
            engine.wait(30)
    print(report(args, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
