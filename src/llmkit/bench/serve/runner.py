"""One ``bench serve`` run: the requests sent on vLLM's arrival schedule, timed, summed up.

Arrivals: all at once for an infinite ``request_rate``, else gaps drawn from a gamma
distribution of shape ``burstiness`` (1: a Poisson process) scaled so that the last one
lands at ``num_prompts / request_rate``; ``max_concurrency`` caps the requests in flight.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import anyio
import httpx
from tqdm import tqdm

from llmkit.bench.serve.client import RequestInput, RequestOutput, send
from llmkit.bench.serve.datasets import SampleRequest, jsonl_requests, random_requests
from llmkit.bench.serve.metrics import calculate, report
from llmkit.bench.serve.options import BACKENDS, BenchServeOptions
from llmkit.bench.serve.saving import save

# Kept only with --save-detailed: a value per request.
DETAILED = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")


def arrival_times(count: int, rate: float, burstiness: float, rng: random.Random) -> list[float]:
    """Each request's send time in seconds from the start."""
    if burstiness <= 0:
        raise ValueError(f"--burstiness must be positive, not {burstiness}")
    if math.isinf(rate):
        return [0.0] * count
    if math.isinf(burstiness):
        gaps = [1.0 / rate] * count
    else:
        gaps = [rng.gammavariate(burstiness, 1 / (rate * burstiness)) for _ in range(count)]
    times = list(itertools.accumulate(gaps))
    scale = (count / rate) / times[-1] if times and times[-1] > 0 else 1.0
    return [t * scale for t in times]


def run(options: BenchServeOptions) -> dict[str, Any]:
    """The benchmark against ``options``' server; the result JSON (saved if asked)."""
    return anyio.run(_run, options)


async def _run(o: BenchServeOptions) -> dict[str, Any]:
    base_url = (o.base_url or f"http://{o.host}:{o.port}").rstrip("/")
    headers = dict(o.headers)
    if o.api_key:
        headers.setdefault("Authorization", f"Bearer {o.api_key}")
    limits = httpx.Limits(max_connections=o.max_concurrency, max_keepalive_connections=None)
    timeout = httpx.Timeout(6 * 3600, connect=30)
    async with httpx.AsyncClient(limits=limits, timeout=timeout, headers=headers) as client:
        model_id = o.model or await _first_model(client, base_url)
        tokenizer_id = o.tokenizer or model_id
        tokenizer = load_tokenizer(tokenizer_id)
        requests = _samples(o, tokenizer)
        url = base_url + (o.endpoint or BACKENDS[o.backend])
        inputs = [_input(o, o.served_model_name or model_id, r) for r in requests]
        await _ready(client, url, o, inputs[0])
        for _ in range(o.num_warmups):  # one after another: warmups are not measured
            await send(client, url, o.backend, inputs[0])
        outputs, duration = await _benchmark(client, url, o, inputs)

    def count(text: str) -> int:  # the output of a server that sent no usage
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    metrics, lens, samples = calculate(
        outputs, duration, count, o.percentile_metrics, o.metric_percentiles, o.goodput
    )
    result: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": o.backend,
        "backend": o.backend,
        "label": o.label,
        "model_id": model_id,
        "tokenizer_id": tokenizer_id,
        "num_prompts": o.num_prompts,
        **o.metadata,
        "request_rate": "inf" if math.isinf(o.request_rate) else o.request_rate,
        "burstiness": o.burstiness,
        "max_concurrency": o.max_concurrency,
        "duration": duration,
        **metrics,
        "input_lens": [out.prompt_len for out in outputs],
        "output_lens": lens,
        "ttfts": [out.ttft for out in outputs],
        "itls": [out.itl for out in outputs],
        "generated_texts": [out.generated_text for out in outputs],
        "errors": [out.error for out in outputs],
    }
    print(report(result, o.percentile_metrics))
    if not o.save_detailed:
        for key in DETAILED:
            del result[key]
    if o.save_result or o.append_result or o.plot:
        for path in save(result, samples, o):
            print(f"wrote {path}")
    return result


def load_tokenizer(name: str) -> Any:
    """A transformers tokenizer for ``name``: a tokenizer or model folder, a GGUF file, or a
    model name llmkit knows (``smollm2``)."""
    from transformers import AutoTokenizer

    from llmkit.model.names import resolve_tokenizer

    try:
        return AutoTokenizer.from_pretrained(resolve_tokenizer(name))
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"no tokenizer for {name!r} ({exc}); give --tokenizer: a tokenizer or model "
            "folder, a GGUF file, or 'smollm2'"
        ) from exc


async def _first_model(client: httpx.AsyncClient, base_url: str) -> str:
    response = await client.get(f"{base_url}/v1/models")
    if response.status_code != 200:
        raise ValueError(f"{base_url}/v1/models answered HTTP {response.status_code}: give --model")
    models = response.json().get("data") or []
    if not models:
        raise ValueError(f"{base_url}/v1/models lists no model")
    return str(models[0]["id"])


def _samples(o: BenchServeOptions, tokenizer: Any) -> list[SampleRequest]:
    if o.dataset_name == "random":
        return random_requests(
            tokenizer,
            o.num_prompts,
            input_len=o.random_input_len,
            output_len=o.random_output_len,
            range_ratio=o.random_range_ratio,
            prefix_len=o.random_prefix_len,
            seed=o.seed,
            id_prefix=o.request_id_prefix,
        )
    if not o.dataset_path:
        raise ValueError("--dataset-name custom needs --dataset-path, a JSONL file of prompts")
    return jsonl_requests(
        tokenizer,
        o.dataset_path,
        o.num_prompts,
        o.custom_output_len,
        seed=o.seed,
        id_prefix=o.request_id_prefix,
    )


def _input(o: BenchServeOptions, model: str, request: SampleRequest) -> RequestInput:
    return RequestInput(
        prompt=request.prompt,
        prompt_len=request.prompt_len,
        output_len=request.expected_output_len,
        model=model,
        request_id=request.request_id,
        ignore_eos=o.ignore_eos or o.dataset_name == "random",
        extra_body={**o.sampling, **o.extra_body},
    )


async def _ready(
    client: httpx.AsyncClient, url: str, o: BenchServeOptions, first: RequestInput
) -> None:
    """The first request, retried until it succeeds or ``ready_check_timeout_sec`` passes."""
    if o.ready_check_timeout_sec <= 0:
        return
    deadline = time.monotonic() + o.ready_check_timeout_sec
    while True:
        out = await send(client, url, o.backend, first)
        if out.success:
            return
        if time.monotonic() > deadline or out.error.startswith("HTTP 4"):
            raise ValueError(f"the first test request failed: {out.error}")
        await anyio.sleep(1)


async def _benchmark(
    client: httpx.AsyncClient, url: str, o: BenchServeOptions, inputs: Sequence[RequestInput]
) -> tuple[list[RequestOutput], float]:
    """Every request on its arrival time; the outputs in order and the run's duration."""
    times = arrival_times(len(inputs), o.request_rate, o.burstiness, random.Random(o.seed))
    outputs: list[RequestOutput] = [RequestOutput()] * len(inputs)
    limit = anyio.Semaphore(o.max_concurrency) if o.max_concurrency else None
    bar = tqdm(total=len(inputs), disable=o.disable_tqdm, desc="requests")

    async def one(i: int) -> None:
        if limit is None:
            outputs[i] = await send(client, url, o.backend, inputs[i])
        else:
            async with limit:
                outputs[i] = await send(client, url, o.backend, inputs[i])
        bar.update(1)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i, at in enumerate(times):
            await anyio.sleep(max(0.0, start + at - time.perf_counter()))
            tg.start_soon(one, i)
    duration = time.perf_counter() - start
    bar.close()
    return outputs, duration
