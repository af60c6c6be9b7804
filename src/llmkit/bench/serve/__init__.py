"""``llmkit bench serve``: vLLM's ``bench serve`` against any OpenAI-compatible server.

The same flags where they apply, the same workloads (the ``random`` dataset, a JSONL of
prompts), the same arrival process and the same result JSON (keys and units), so that a
run's file sits beside vLLM's in the same plots; plus an SVG of the latency distributions.

    from llmkit.bench.serve import BenchServeOptions, run
    result = run(BenchServeOptions(base_url="http://127.0.0.1:8000", num_prompts=32))
"""

from __future__ import annotations

from typing import Any

from llmkit.bench.serve.options import BenchServeOptions

__all__ = ["BenchServeOptions", "run"]


def run(options: BenchServeOptions) -> dict[str, Any]:
    """The benchmark against ``options``' server; the result JSON (saved if asked). The
    runner (httpx, tqdm, the tokenizer) is imported here, not when the CLI reads its flags."""
    from llmkit.bench.serve.runner import run as run_bench

    return run_bench(options)
