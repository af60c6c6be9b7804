"""vLLM's serving metrics from the requests' timings, in its result JSON's keys and units.

Latencies are kept in seconds per request (``ttfts``, ``itls``) and reported in
milliseconds (``mean_ttft_ms``, ``p99_itl_ms``, ...); TPOT is a request's time after its
first token over its other tokens; an empty list reports 0, as numpy's ``mean(... or 0)``
does in vLLM. Percentiles interpolate linearly between ranks (numpy's default).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from llmkit.bench.serve.client import RequestOutput
from llmkit.bench.serve.options import METRICS


def percentile(values: Sequence[float], p: float) -> float:
    """numpy.percentile(values, p) with its default (linear) method."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def calculate(
    outputs: Sequence[RequestOutput],
    duration: float,
    count_tokens: Callable[[str], int],
    percentile_metrics: Sequence[str],
    percentiles: Sequence[float],
    goodput: dict[str, float] | None = None,
) -> tuple[dict[str, Any], list[int], dict[str, list[float]]]:
    """The result's metric keys, each request's output length (0 for a failed one), and
    each metric's samples in seconds (what the chart draws).

    ``count_tokens``: the output length of a request whose server sent no usage.
    ``goodput``: SLOs in ms (``ttft``, ``tpot``, ``e2el``) a good request meets.
    """
    lens: list[int] = []
    samples: dict[str, list[float]] = {name: [] for name in METRICS}
    good = 0
    for out in outputs:
        if not out.success:
            lens.append(0)
            continue
        n = out.output_tokens or count_tokens(out.generated_text)
        lens.append(n)
        tpot = (out.latency - out.ttft) / (n - 1) if n > 1 else 0.0
        if n > 1:
            samples["tpot"].append(tpot)
        samples["ttft"].append(out.ttft)
        samples["itl"].extend(out.itl)
        samples["e2el"].append(out.latency)
        mine = {"ttft": out.ttft, "tpot": tpot, "e2el": out.latency}
        if goodput and all(mine[k] * 1e3 <= slo for k, slo in goodput.items()):
            good += 1
    done = [o for o in outputs if o.success]
    total_in = sum(o.prompt_len for o in done)
    total_out = sum(lens)
    peak_tokens, peak_requests = _peaks(done)
    result: dict[str, Any] = {
        "completed": len(done),
        "failed": len(outputs) - len(done),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / duration,
        "request_goodput": good / duration if goodput else None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_requests,
    }
    for name in METRICS:
        if name not in percentile_metrics:
            continue
        values = samples[name] or [0.0]
        result[f"mean_{name}_ms"] = statistics.fmean(values) * 1e3
        result[f"median_{name}_ms"] = statistics.median(values) * 1e3
        result[f"std_{name}_ms"] = statistics.pstdev(values) * 1e3
        for p in percentiles:
            result[f"p{_word(p)}_{name}_ms"] = percentile(values, p) * 1e3
    return result, lens, samples


def _word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def _peaks(outputs: Sequence[RequestOutput]) -> tuple[float, int]:
    """The most output chunks in one second of the run, and the most requests running in
    one second (vLLM's ``max_output_tokens_per_s`` and ``max_concurrent_requests``)."""
    if not outputs:
        return 0.0, 0
    start = min(o.start_time for o in outputs)
    seconds = math.ceil(max(o.start_time + o.latency for o in outputs) - start) + 1
    tokens, running = [0] * seconds, [0] * seconds
    for out in outputs:
        at = out.start_time + out.ttft
        stamps = [at]
        for gap in out.itl:
            at += gap
            stamps.append(at)
        for stamp in stamps:
            tokens[min(int(stamp - start), seconds - 1)] += 1
        first = int(out.start_time - start)
        for second in range(first, int(out.start_time + out.latency - start) + 1):
            running[second] += 1
    return float(max(tokens)), max(running)


def report(result: dict[str, Any], percentile_metrics: Sequence[str]) -> str:
    """The result as vLLM prints it: a block of aligned lines."""
    lines = ["{:=^50}".format(" Serving Benchmark Result ")]

    def row(label: str, value: Any, fmt: str = "") -> None:
        lines.append(f"{label:<40} {value:<10{fmt}}")

    row("Successful requests:", result["completed"])
    row("Failed requests:", result["failed"])
    if result.get("max_concurrency") is not None:
        row("Maximum request concurrency:", result["max_concurrency"])
    if result.get("request_rate", "inf") != "inf":
        row("Request rate configured (RPS):", result["request_rate"], ".2f")
    row("Benchmark duration (s):", result["duration"], ".2f")
    row("Total input tokens:", result["total_input_tokens"])
    row("Total generated tokens:", result["total_output_tokens"])
    row("Request throughput (req/s):", result["request_throughput"], ".2f")
    if result["request_goodput"] is not None:
        row("Request goodput (req/s):", result["request_goodput"], ".2f")
    row("Output token throughput (tok/s):", result["output_throughput"], ".2f")
    row("Peak output token throughput (tok/s):", result["max_output_tokens_per_s"], ".2f")
    row("Peak concurrent requests:", result["max_concurrent_requests"], ".2f")
    row("Total token throughput (tok/s):", result["total_token_throughput"], ".2f")
    for name, header in METRICS.items():
        if name not in percentile_metrics:
            continue
        short = name.upper()
        lines.append(f"{header:-^50}")
        row(f"Mean {short} (ms):", result[f"mean_{name}_ms"], ".2f")
        row(f"Median {short} (ms):", result[f"median_{name}_ms"], ".2f")
        for key, value in result.items():
            if key.startswith("p") and key.endswith(f"_{name}_ms"):
                row(f"P{key[1:].split('_')[0]} {short} (ms):", value, ".2f")
    lines.append("=" * 50)
    return "\n".join(lines)
