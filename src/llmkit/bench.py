"""Benchmarks shipped with the package: ``llmkit bench throughput`` and ``llmkit bench serve``.

``serve`` drives N concurrent streaming clients against a server over HTTP and the same
load against an AsyncEngine called directly in this process, level by level, and reports
the ratio of the two throughputs: what the HTTP layer costs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import anyio

from llmkit.bench_http import SSEClient
from llmkit.engine_args import add_engine_flags, engine_kwargs, to_flags

_WORDS = (
    "the quick brown fox jumps over a lazy dog while river light music story garden window "
    "coffee morning evening city night model token engine serve batch cache block request"
).split()


def add_commands(commands: argparse._SubParsersAction) -> None:
    throughput = commands.add_parser("throughput", help="offline generation throughput (LLM)")
    throughput.add_argument("--model", default="demo")
    throughput.add_argument("--num-prompts", type=int, default=64)
    _add_workload_flags(throughput)
    add_engine_flags(throughput)
    throughput.set_defaults(handler=throughput_main)

    serve = commands.add_parser("serve", help="streaming clients over HTTP vs the engine directly")
    serve.add_argument("--model", default="demo")
    serve.add_argument("--url", help="a running server (default: start `llmkit serve` for the run)")
    serve.add_argument("--api-key")
    serve.add_argument("--served-model-name", help="the model name the server knows (default: its own)")
    serve.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    serve.add_argument("--rounds", type=int, default=2, help="requests per client at each level")
    serve.add_argument("--skip-direct", action="store_true", help="no direct-engine baseline")
    serve.add_argument(
        "--repeat", type=int, default=1,
        help="runs per level and side, alternating; each side keeps its best (for shared machines)",
    )
    _add_workload_flags(serve)
    add_engine_flags(serve)
    serve.set_defaults(handler=serve_main)


def _add_workload_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-words", type=int, default=24, help="words per prompt")
    parser.add_argument("--output-len", type=int, default=128, help="tokens per completion")
    parser.add_argument("--workload-seed", type=int, default=0, help="seed of the random prompts")


def make_prompts(count: int, words: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=words)) for _ in range(count)]


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


# ---- offline throughput ---------------------------------------------------------------------


def throughput_main(args: argparse.Namespace) -> int:
    from llmkit.engine.llm import LLM
    from llmkit.sampling_params import SamplingParams

    llm = LLM(args.model, **engine_kwargs(args))
    prompts = make_prompts(args.num_prompts, args.input_words, args.workload_seed)
    params = SamplingParams(max_tokens=args.output_len, ignore_eos=True, temperature=0.0)
    llm.generate(prompts[:2], SamplingParams(max_tokens=4), use_tqdm=False)  # warm up
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    generated = sum(len(o.outputs[0].token_ids) for o in outputs)
    prompt_tokens = sum(len(o.prompt_token_ids) for o in outputs)
    print(f"model {args.model}; {machine()}")
    print(
        f"{len(prompts)} requests in {elapsed:.2f} s: {len(prompts) / elapsed:.2f} req/s, "
        f"{generated / elapsed:.1f} output tok/s, {(generated + prompt_tokens) / elapsed:.1f} total tok/s"
    )
    return 0


# ---- serving --------------------------------------------------------------------------------


@dataclass
class RequestResult:
    ttft: float
    gaps: list[float]
    tokens: int


@dataclass
class LevelResult:
    """One concurrency level of one mode (HTTP or direct)."""

    concurrency: int
    elapsed: float
    results: list[RequestResult] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return sum(r.tokens for r in self.results) / self.elapsed

    def ttft_ms(self, q: float) -> float:
        return _quantile([r.ttft for r in self.results], q) * 1e3

    def itl_ms(self, q: float) -> float:
        return _quantile([g for r in self.results for g in r.gaps], q) * 1e3


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


async def _direct_request(engine, prompt: str, params) -> RequestResult:
    start = time.perf_counter()
    stamps: list[float] = []
    tokens = 0
    async for out in engine.generate(prompt, params):
        count = sum(len(o.token_ids) for o in out.outputs)
        if count:
            stamps.append(time.perf_counter())
            tokens += count
    return RequestResult(stamps[0] - start, [b - a for a, b in zip(stamps, stamps[1:])], tokens)


async def _level(concurrency: int, prompts: list[str], rounds: int, one) -> LevelResult:
    results: list[RequestResult] = []

    async def client(worker: int) -> None:
        for r in range(rounds):
            results.append(await one(prompts[(worker * rounds + r) % len(prompts)]))

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for worker in range(concurrency):
            tg.start_soon(client, worker)
    return LevelResult(concurrency, time.perf_counter() - start, results)


class HttpLoad:
    """Streaming completion requests over HTTP, as an OpenAI client sends them."""

    def __init__(self, url: str, model: str | None, api_key: str | None, args: argparse.Namespace):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = SSEClient(url, headers)
        self.model = model
        self.output_len = args.output_len

    async def __call__(self, prompt: str) -> RequestResult:
        body = {
            "prompt": prompt, "max_tokens": self.output_len, "temperature": 0.0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
        }
        if self.model:
            body["model"] = self.model
        timing = await self.client.post("/v1/completions", body)
        stamps = timing.stamps[:-1]  # the last event is the usage, after the last token
        return RequestResult(
            stamps[0] - timing.start,
            [b - a for a, b in zip(stamps, stamps[1:])],
            timing.last["usage"]["completion_tokens"],
        )


class DirectLoad:
    """The same requests on an AsyncEngine in this process: the baseline."""

    def __init__(self, engine, args: argparse.Namespace):
        from llmkit.sampling_params import RequestOutputKind, SamplingParams

        self.engine = engine
        self.params = SamplingParams(
            max_tokens=args.output_len, temperature=0.0, ignore_eos=True,
            output_kind=RequestOutputKind.DELTA,
        )

    async def __call__(self, prompt: str) -> RequestResult:
        return await _direct_request(self.engine, prompt, self.params)


async def run_levels(
    url: str, model: str | None, args: argparse.Namespace
) -> tuple[list[LevelResult], list[LevelResult] | None]:
    """Each concurrency level over HTTP, then directly, back to back, ``--repeat`` times.

    Alternating keeps whatever else the machine is doing from favouring one side; the
    server's engine sits idle (no CPU) while the direct one runs, and the other way round.
    """
    from llmkit.engine.async_engine import AsyncEngine
    from llmkit.engine_args import engine_config

    prompts = make_prompts(max(args.concurrency) * args.rounds, args.input_words, args.workload_seed)
    loads = {"http": HttpLoad(url, model, args.api_key, args)}
    async with contextlib.AsyncExitStack() as stack:
        if not args.skip_direct:
            engine = await stack.enter_async_context(AsyncEngine(engine_config(args.model, args)))
            loads["direct"] = DirectLoad(engine, args)
        for load in loads.values():
            await load(prompts[0])  # warm up
        best: dict[str, list[LevelResult]] = {name: [] for name in loads}
        for c in args.concurrency:
            runs: dict[str, list[LevelResult]] = {name: [] for name in loads}
            for _ in range(args.repeat):
                for name, load in loads.items():
                    runs[name].append(await _level(c, prompts, args.rounds, load))
            for name in loads:
                best[name].append(max(runs[name], key=lambda r: r.tokens_per_s))
    return best["http"], best.get("direct")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, flags: list[str], timeout: float = 300.0) -> tuple[subprocess.Popen, str]:
    """``llmkit serve`` on a free port; returns the process and its base URL once healthy."""
    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "llmkit.cli", "serve", model, "--port", str(port), "--log-level", "warning", *flags]
    proc = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llmkit serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise TimeoutError("llmkit serve did not become healthy in time")


def serve_main(args: argparse.Namespace) -> int:
    proc = None
    url = args.url
    if url is None:
        proc, url = start_server(args.model, to_flags(engine_kwargs(args)))
    try:
        base = url.rstrip("/").removesuffix("/v1")
        http, direct = anyio.run(run_levels, base, args.served_model_name, args)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    print(report(args, http, direct))
    return 0


def report(args: argparse.Namespace, http: list[LevelResult], direct: list[LevelResult] | None) -> str:
    lines = [
        f"model {args.model}; {args.input_words}-word prompts, {args.output_len} output tokens "
        f"(ignore_eos), {args.rounds} requests per client, best of {args.repeat}; {machine()}",
        "",
        "| clients | HTTP out tok/s | direct out tok/s | HTTP / direct | TTFT p50 / p99 ms | "
        "ITL p50 / p99 ms | direct TTFT p50 ms | direct ITL p50 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, h in enumerate(http):
        d = direct[i] if direct else None
        ratio = f"{d.tokens_per_s:.1f} | {h.tokens_per_s / d.tokens_per_s:.2f}" if d else "- | -"
        direct_latency = f"{d.ttft_ms(0.5):.1f} | {d.itl_ms(0.5):.1f}" if d else "- | -"
        lines.append(
            f"| {h.concurrency} | {h.tokens_per_s:.1f} | {ratio} | "
            f"{h.ttft_ms(0.5):.1f} / {h.ttft_ms(0.99):.1f} | {h.itl_ms(0.5):.1f} / {h.itl_ms(0.99):.1f} | "
            f"{direct_latency} |"
        )
    return "\n".join(lines)
