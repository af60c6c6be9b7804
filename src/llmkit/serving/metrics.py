"""Prometheus metrics of a served engine: load read at scrape time, per-request latencies.

Names follow vLLM's with an ``llmkit:`` prefix. Every app gets its own registry, so two
apps (or two tests) in one process never share or clash over metrics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from llmkit.engine.sched.admission import QUEUE_WAIT_BUCKETS

if TYPE_CHECKING:
    from llmkit.engine.protocol import EngineProtocol
    from llmkit.types import EngineStats


_LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
# When one request's choices end differently, the first of these that occurs counts.
_REASONS = ("abort", "length", "stop")


class _EngineCollector(Collector):
    """Reads the engine's published stats when scraped; costs nothing between scrapes."""

    def __init__(self, engine: EngineProtocol):
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        s = self._engine.stats()
        usage = 1.0 - s.kv_blocks_free / s.kv_blocks_total if s.kv_blocks_total else 0.0
        yield GaugeMetricFamily(
            "llmkit:num_requests_running", "Sequences in the running batch.", value=s.num_running
        )
        yield GaugeMetricFamily(
            "llmkit:num_requests_waiting", "Sequences waiting to be scheduled.", value=s.num_waiting
        )
        yield GaugeMetricFamily(
            "llmkit:kv_cache_usage_perc",
            "Fraction of KV cache blocks in use (1 = all).",
            value=usage,
        )
        yield GaugeMetricFamily(
            "llmkit:prefix_cache_hit_rate",
            "Fraction of prompt blocks found in the prefix cache.",
            value=s.prefix_cache_hit_rate,
        )
        yield CounterMetricFamily(
            "llmkit:prompt_tokens", "Prompt tokens received.", value=s.prompt_tokens
        )
        yield CounterMetricFamily(
            "llmkit:generation_tokens", "Tokens generated.", value=s.generated_tokens
        )
        yield CounterMetricFamily(
            "llmkit:num_preemptions",
            "Sequences preempted for lack of KV blocks.",
            value=s.num_preemptions,
        )
        yield CounterMetricFamily("llmkit:engine_steps", "Engine steps run.", value=s.steps)
        yield CounterMetricFamily(
            "llmkit:structured_output_compiles",
            "Structured-output grammars compiled (a repeated spec is found in the cache).",
            value=self._engine.grammar_compiles,
        )
        yield GaugeMetricFamily(
            "llmkit:engine_healthy",
            "1 while the engine runs and completes steps; 0 once it died or stalled.",
            value=float(self._engine.is_healthy()),
        )
        yield GaugeMetricFamily(
            "llmkit:num_requests_queued",
            "Requests admitted but not yet run (what max_queued_requests limits).",
            value=s.num_queued,
        )
        for name, value, text in (
            ("num_drafts", s.spec_num_drafts, "Steps that checked speculative proposals."),
            ("num_draft_tokens", s.spec_num_draft_tokens, "Speculative tokens proposed."),
            ("num_accepted_tokens", s.spec_num_accepted_tokens, "Proposed tokens accepted."),
        ):
            yield CounterMetricFamily(f"llmkit:spec_decode_{name}", text, value=value)
        yield from _prompt_cache(s)
        if s.queue_wait_buckets:
            bounds = [*map(str, QUEUE_WAIT_BUCKETS), "+Inf"]
            yield HistogramMetricFamily(
                "llmkit:request_queue_time_seconds",
                "Time requests waited for their first step.",
                buckets=list(zip(bounds, s.queue_wait_buckets)),
                sum_value=s.queue_wait_sum,
            )


def _prompt_cache(s: EngineStats) -> Iterator[Metric]:
    """The prompt cache's tiers: the pool, host memory and disk."""
    queried = CounterMetricFamily(
        "llmkit:prompt_cache_queried_tokens",
        "Prompt tokens a prefix lookup asked of each tier (those the tiers above lacked).",
        labels=["tier"],
    )
    hits = CounterMetricFamily(
        "llmkit:prompt_cache_hit_tokens",
        "Prompt tokens found in each tier (the rest of those asked were misses there).",
        labels=["tier"],
    )
    for tier in ("pool", "host", "disk"):
        queried.add_metric([tier], getattr(s, f"prompt_cache_{tier}_queried_tokens"))
        hits.add_metric([tier], getattr(s, f"prompt_cache_{tier}_hit_tokens"))
    size = GaugeMetricFamily(
        "llmkit:prompt_cache_bytes",
        "The model's bytes in each tier below the KV pool.",
        labels=["tier"],
    )
    size.add_metric(["host"], s.prompt_cache_host_bytes)
    size.add_metric(["disk"], s.prompt_cache_disk_bytes)
    yield from (queried, hits, size)
    yield CounterMetricFamily(
        "llmkit:prompt_cache_saved_seconds",
        "Prefill time the prompt cache's hits saved, estimated at the measured prompt speed.",
        value=s.prompt_cache_saved_seconds,
    )


class ServerMetrics:
    """The metrics of one served app; a :class:`RequestTracker` times one engine request."""

    def __init__(self, engine: EngineProtocol):
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(engine))
        reg = self.registry
        self.ttft = Histogram(
            "llmkit:time_to_first_token_seconds",
            "Time to first token.",
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.itl = Histogram(
            "llmkit:inter_token_latency_seconds",
            "Time between generated tokens.",
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.e2e = Histogram(
            "llmkit:e2e_request_latency_seconds",
            "Time from arrival to the last token.",
            buckets=(*_LATENCY_BUCKETS, 160.0, 320.0),
            registry=reg,
        )
        self.finished = Counter(
            "llmkit:request_success",
            "Requests finished, by finish reason.",
            ["finished_reason"],
            registry=reg,
        )
        for reason in _REASONS:
            self.finished.labels(reason)
        self.failed = Counter(
            "llmkit:request_failure", "Requests the engine failed on.", registry=reg
        )
        self.refused = Counter(
            "llmkit:request_refused",
            "Requests refused (503) or dropped for overload or shutdown, by reason.",
            ["reason"],
            registry=reg,
        )
        self.rate_limited = Counter(
            "llmkit:rate_limit_hits",
            "Requests refused (429) over a per-key limit, by key id and limit.",
            ["key", "limit"],
            registry=reg,
        )

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class RequestTracker:
    """Times one engine request from arrival through its tokens to its end."""

    __slots__ = ("_done", "_last", "_metrics", "_start")

    def __init__(self, metrics: ServerMetrics | None):
        self._metrics = metrics
        self._start = time.perf_counter()
        self._last: float | None = None
        self._done = metrics is None

    def tokens(self, count: int) -> None:
        """``count`` new tokens arrived together (a slow reader sees several at once)."""
        m = self._metrics
        if m is None or self._done or count <= 0:
            return
        now = time.perf_counter()
        if self._last is None:
            m.ttft.observe(now - self._start)
            # Tokens that came with the first one came at the same time.
            gap, count = 0.0, count - 1
        else:
            gap = (now - self._last) / count
        for _ in range(count):
            m.itl.observe(gap)
        self._last = now

    def finish(self, reasons: set[str | None]) -> None:
        """The request ended; ``"error"`` among the reasons counts it as a failure."""
        m = self._metrics
        if m is None or self._done:
            return
        self._done = True
        if "error" in reasons:
            m.failed.inc()
            return
        m.e2e.observe(time.perf_counter() - self._start)
        m.finished.labels(next((r for r in _REASONS if r in reasons), "stop")).inc()
