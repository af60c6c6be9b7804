"""What the serving benchmark measures per request and per concurrency level, and its table."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class RequestResult:
    """One streamed request: time to first token, the gaps between token events, tokens."""

    ttft: float
    gaps: list[float]
    tokens: int


@dataclass
class LevelResult:
    """One concurrency level of one side (HTTP or direct).

    ``cpu`` is this process's CPU time over the level: the clients' cost on the HTTP side
    (the server is another process), the engine's and its callers' on the direct side.
    """

    concurrency: int
    elapsed: float
    cpu: float
    results: list[RequestResult] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return sum(r.tokens for r in self.results) / self.elapsed

    @property
    def cpu_share(self) -> float:
        """CPU time over wall time: 1.0 is one core busy for the whole level."""
        return self.cpu / self.elapsed

    def ttft_ms(self, q: float) -> float:
        return quantile([r.ttft for r in self.results], q) * 1e3

    def itl_ms(self, q: float) -> float:
        return quantile([g for r in self.results for g in r.gaps], q) * 1e3


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def table(http: list[LevelResult], direct: list[LevelResult] | None) -> str:
    """A markdown table, one row per level: throughputs, their ratio, latencies, client CPU."""
    lines = [
        "| clients | HTTP out tok/s | direct out tok/s | HTTP / direct | TTFT p50 / p99 ms | "
        "ITL p50 / p99 ms | direct TTFT p50 ms | direct ITL p50 ms | HTTP client CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, h in enumerate(http):
        d = direct[i] if direct else None
        ratio = f"{d.tokens_per_s:.1f} | {h.tokens_per_s / d.tokens_per_s:.2f}" if d else "- | -"
        direct_latency = f"{d.ttft_ms(0.5):.1f} | {d.itl_ms(0.5):.1f}" if d else "- | -"
        lines.append(
            f"| {h.concurrency} | {h.tokens_per_s:.1f} | {ratio} | "
            f"{h.ttft_ms(0.5):.1f} / {h.ttft_ms(0.99):.1f} | "
            f"{h.itl_ms(0.5):.1f} / {h.itl_ms(0.99):.1f} | {direct_latency} | "
            f"{100 * h.cpu_share:.0f}% |"
        )
    return "\n".join(lines)
