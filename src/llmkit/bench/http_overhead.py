"""Serving benchmark: streaming OpenAI clients over HTTP vs the same load on AsyncEngine directly.

For each number of concurrent clients it runs the load over HTTP, through the official
``openai.AsyncOpenAI`` client on one pool of kept-alive connections, and on an AsyncEngine
in this process, and reports the ratio of the two throughputs: what the HTTP layer costs.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import openai

from llmkit.bench.results import LevelResult, RequestResult, table
from llmkit.bench.server import start_server
from llmkit.bench.workload import Workload, machine
from llmkit.config import EngineConfig
from llmkit.engine.async_engine import AsyncEngine
from llmkit.sampling_params import RequestOutputKind, SamplingParams

Load = Callable[[str], Awaitable[RequestResult]]

# Below uvicorn's keep-alive timeout (5 s), so the pool drops an idle connection before the
# server closes it under a request; the direct side's runs leave the pool idle that long.
_KEEPALIVE_EXPIRY_S = 4.0


@dataclass(frozen=True)
class ServingOptions:
    """The levels, how often each runs, and the requests each client sends."""

    concurrency: tuple[int, ...] = (1, 16, 64)
    rounds: int = 2
    repeat: int = 1
    direct: bool = True
    workload: Workload = field(default_factory=Workload)


@dataclass
class ServingResult:
    """Each level's best run over HTTP and (unless skipped) directly."""

    model: str
    options: ServingOptions
    http: list[LevelResult]
    direct: list[LevelResult] | None

    def report(self) -> str:
        o, w = self.options, self.options.workload
        return (
            f"model {self.model}; {w.input_words}-word prompts, {w.output_len} output tokens "
            f"(ignore_eos), {o.rounds} requests per client, best of {o.repeat}; {machine()}\n\n"
            + table(self.http, self.direct)
        )


def run_serving(
    config: EngineConfig,
    options: ServingOptions,
    *,
    url: str | None = None,
    api_key: str | None = None,
    served_model_name: str | None = None,
    server_flags: Sequence[str] = (),
) -> ServingResult:
    """The benchmark against ``url``, or against ``llmkit serve`` started with ``server_flags``."""
    proc = None
    if url is None:
        proc, url = start_server(config.model, list(server_flags))
    try:
        base = url.rstrip("/").removesuffix("/v1")
        run = functools.partial(_run_levels, base, config, options, api_key, served_model_name)
        http, direct = anyio.run(run)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    return ServingResult(config.model, options, http, direct)


class HttpLoad:
    """Streaming completion requests through the official OpenAI client."""

    def __init__(self, client: openai.AsyncOpenAI, model: str, output_len: int):
        self.client = client
        self.model = model
        self.output_len = output_len

    async def __call__(self, prompt: str) -> RequestResult:
        start = time.perf_counter()
        stream = await self.client.completions.create(
            model=self.model,
            prompt=prompt,
            max_tokens=self.output_len,
            temperature=0.0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        stamps: list[float] = []
        tokens = 0
        async for chunk in stream:
            if chunk.choices:
                stamps.append(time.perf_counter())
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
        return RequestResult(stamps[0] - start, _gaps(stamps), tokens)


class DirectLoad:
    """The same requests on an AsyncEngine in this process: the baseline."""

    def __init__(self, engine: AsyncEngine, output_len: int):
        self.engine = engine
        self.params = SamplingParams(
            max_tokens=output_len,
            temperature=0.0,
            ignore_eos=True,
            output_kind=RequestOutputKind.DELTA,
        )

    async def __call__(self, prompt: str) -> RequestResult:
        start = time.perf_counter()
        stamps: list[float] = []
        tokens = 0
        async for out in self.engine.generate(prompt, self.params):
            count = sum(len(o.token_ids) for o in out.outputs)
            if count:
                stamps.append(time.perf_counter())
                tokens += count
        return RequestResult(stamps[0] - start, _gaps(stamps), tokens)


def _gaps(stamps: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(stamps)]


def openai_client(base_url: str, api_key: str | None, connections: int) -> openai.AsyncOpenAI:
    """An AsyncOpenAI client whose pool keeps a connection alive for each concurrent client."""
    limits = httpx.Limits(
        max_connections=connections,
        max_keepalive_connections=connections,
        keepalive_expiry=_KEEPALIVE_EXPIRY_S,
    )
    # Any: openai 1.x annotates httpx.AsyncClient, later majors httpx2's, and accept both.
    http_client: Any = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(600.0))
    return openai.AsyncOpenAI(
        base_url=f"{base_url}/v1",
        api_key=api_key or "none",
        max_retries=0,
        http_client=http_client,
    )


async def _run_level(concurrency: int, prompts: list[str], rounds: int, load: Load) -> LevelResult:
    """``concurrency`` clients, each sending its ``rounds`` prompts one after another."""
    results: list[RequestResult] = []

    async def client(worker: int) -> None:
        mine = prompts[worker * rounds :][:rounds]
        results.extend([await load(prompt) for prompt in mine])

    start, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for worker in range(concurrency):
            tg.start_soon(client, worker)
    return LevelResult(concurrency, time.perf_counter() - start, time.process_time() - cpu, results)


async def _run_levels(
    base_url: str,
    config: EngineConfig,
    options: ServingOptions,
    api_key: str | None,
    served_model_name: str | None,
) -> tuple[list[LevelResult], list[LevelResult] | None]:
    """Each concurrency level over HTTP, then directly, back to back, ``repeat`` times.

    Alternating keeps whatever else the machine is doing from favouring one side; the
    server's engine sits idle (no CPU) while the direct one runs, and the other way round.
    """
    prompts = options.workload.prompts(max(options.concurrency) * options.rounds)
    async with contextlib.AsyncExitStack() as stack:
        client = openai_client(base_url, api_key, max(options.concurrency))
        await stack.enter_async_context(client)
        model = served_model_name or (await client.models.list()).data[0].id
        loads: dict[str, Load] = {"http": HttpLoad(client, model, options.workload.output_len)}
        if options.direct:
            engine = await stack.enter_async_context(AsyncEngine(config))
            loads["direct"] = DirectLoad(engine, options.workload.output_len)
        best = await best_levels(
            loads, options.concurrency, prompts, options.rounds, options.repeat
        )
    return best["http"], best.get("direct")


async def best_levels(
    loads: dict[str, Load],
    concurrency: Sequence[int],
    prompts: list[str],
    rounds: int,
    repeat: int,
) -> dict[str, list[LevelResult]]:
    """Each side's best run (by throughput) at each level, the sides taking turns ``repeat``
    times after one warm-up request each."""
    for load in loads.values():
        await load(prompts[0])
    best: dict[str, list[LevelResult]] = {side: [] for side in loads}
    for level in concurrency:
        runs: dict[str, list[LevelResult]] = {side: [] for side in loads}
        for _ in range(repeat):
            for side, load in loads.items():
                runs[side].append(await _run_level(level, prompts, rounds, load))
        for side, levels in runs.items():
            best[side].append(max(levels, key=lambda r: r.tokens_per_s))
    return best
