"""Prometheus families of a manager's models, one sample per model, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llmkit.manager.manager import ModelManager
from llmkit.manager.slot import ModelStatus

_FAMILIES = (
    ("model_loaded", "1 while the model is loaded.", lambda s: float(s.state == "loaded")),
    ("model_requests_in_flight", "Requests holding the model.", lambda s: s.in_flight),
    (
        "model_resident_bytes",
        "The model's resident bytes while loaded (estimated before loading), else 0.",
        lambda s: s.resident_bytes if s.state == "loaded" else 0,
    ),
)
_COUNTERS = (
    ("model_loads", "Times the model was loaded.", lambda s: s.loads),
    ("model_load_seconds", "Seconds spent loading the model.", lambda s: s.load_seconds),
    ("model_evictions", "Times the model was unloaded to make room.", lambda s: s.evictions),
)


class ModelsCollector(Collector):
    def __init__(self, models: ModelManager):
        self._models = models

    def collect(self) -> Iterator[Metric]:
        statuses: list[ModelStatus] = self._models.status()
        for name, text, value in _FAMILIES:
            gauge = GaugeMetricFamily(f"llmkit:{name}", text, labels=["model_name"])
            for s in statuses:
                gauge.add_metric([s.name], value(s))
            yield gauge
        for name, text, value in _COUNTERS:
            counter = CounterMetricFamily(f"llmkit:{name}", text, labels=["model_name"])
            for s in statuses:
                counter.add_metric([s.name], value(s))
            yield counter
