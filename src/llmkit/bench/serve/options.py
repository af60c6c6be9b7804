"""What a ``bench serve`` run is asked to do: vLLM's ``bench serve`` arguments, its defaults,
and the names they choose from (light: the CLI reads them to build its flags)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The backends (``--backend``) and each one's default endpoint.
BACKENDS = {
    "openai": "/v1/completions",
    "vllm": "/v1/completions",
    "openai-chat": "/v1/chat/completions",
}
# The latency metrics (``--percentile-metrics``) and their headers in the report.
METRICS = {
    "ttft": "Time to First Token",
    "tpot": "Time per Output Token (excl. 1st token)",
    "itl": "Inter-token Latency",
    "e2el": "End-to-end Latency",
}
GOODPUT_METRICS = ("ttft", "tpot", "e2el")


@dataclass(frozen=True)
class BenchServeOptions:
    # The server.
    backend: str = "openai"
    base_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    endpoint: str | None = None  # None: the backend's (/v1/completions, /v1/chat/completions)
    headers: dict[str, str] = field(default_factory=dict)
    api_key: str | None = None  # sent as a bearer token (the CLI: OPENAI_API_KEY, as vLLM)
    model: str | None = None  # None: the first model the server lists
    served_model_name: str | None = None
    tokenizer: str | None = None  # None: the model's
    # The requests.
    dataset_name: str = "random"
    dataset_path: str | None = None
    num_prompts: int = 1000
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_prefix_len: int = 0
    custom_output_len: int = 256
    seed: int = 0
    ignore_eos: bool = False  # always on for the random dataset, as vLLM does
    sampling: dict[str, float] = field(default_factory=lambda: {"temperature": 0.0})
    extra_body: dict[str, Any] = field(default_factory=dict)
    request_id_prefix: str = "bench-"
    # The traffic.
    request_rate: float = float("inf")
    burstiness: float = 1.0
    max_concurrency: int | None = None
    num_warmups: int = 0
    ready_check_timeout_sec: int = 600
    # What is measured and kept.
    percentile_metrics: tuple[str, ...] = ("ttft", "tpot", "itl")
    metric_percentiles: tuple[float, ...] = (99.0,)
    goodput: dict[str, float] = field(default_factory=dict)
    label: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    save_result: bool = False
    save_detailed: bool = False
    append_result: bool = False
    result_dir: str | None = None
    result_filename: str | None = None
    plot: bool = False
    disable_tqdm: bool = False
