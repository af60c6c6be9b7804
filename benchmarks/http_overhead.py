"""Serving benchmark: concurrent streaming clients over HTTP vs the engine called directly.

    python benchmarks/http_overhead.py --model demo            # starts `llmkit serve` itself
    python benchmarks/http_overhead.py --model demo --url http://127.0.0.1:8000

The same as ``llmkit bench http`` (needs ``pip install 'llmkit[bench]'``); the logic lives
in ``llmkit.bench.http_overhead``. For each number of clients (1, 16, 64 by default) it streams
completions through the official ``openai.AsyncOpenAI`` client and reports TTFT,
inter-token latency and output tokens/s, and the ratio of HTTP throughput to AsyncEngine's
in the same run.
"""

from __future__ import annotations

import sys

from llmkit.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "http", *sys.argv[1:]]))
