"""``llmkit bench serve`` (vLLM's format) against llmkit's server and llama-server on the same
GGUF file: the random dataset at 1, 4 and 16 concurrent requests.

    python benchmarks/bench_serve.py --llama-cpp LLAMA_CPP_SRC [--file FILE.gguf] \
        [--threads 2] [--repeat 2] [--result-dir bench-serve-results]

Each server runs alone (``--threads`` threads; llama-server with 16 slots and continuous
batching, llmkit with its defaults), one after the other, ``--repeat`` times; each level's
best run (by output throughput) is kept. Every run's vLLM-format JSON and latency SVG land
in ``--result-dir``; the markdown table RESULTS.md holds is printed at the end. Each
level draws its own prompts (seed: the level), so no level finds another's in a prefix cache;
the one warm-up request repeats the level's first prompt, as vLLM's does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hybrid_turns import _free_port, server

from llmkit.bench.serve import BenchServeOptions, run
from llmkit.model.names import installed_gguf

LEVELS = (1, 4, 16)
INPUT_LEN, OUTPUT_LEN = 256, 128


def prompts_at(level: int) -> int:
    return max(8, 2 * level)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp's source")
    parser.add_argument("--file", help="a GGUF file (default: SmolLM2's Q4_1)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--result-dir", default="bench-serve-results")
    args = parser.parse_args()
    file = str(args.file or installed_gguf("smollm2"))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    slots = max(LEVELS)
    sides = {
        "llama-server": lambda port: [
            str(args.llama_cpp / "build/bin/llama-server"),
            *("-m", file, "-t", str(args.threads), "-np", str(slots)),
            *("-c", str(slots * (INPUT_LEN + OUTPUT_LEN + 64))),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        "llmkit": lambda port: [
            sys.executable,
            *("-m", "llmkit.cli", "serve", file, "--served-model-name", "smollm2", "m"),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
    }
    best: dict[tuple[str, int], dict] = {}
    for _ in range(args.repeat):
        for name, argv in sides.items():
            port = _free_port()
            with server(argv(port), port) as url:
                for level in LEVELS:
                    result = run(
                        BenchServeOptions(
                            base_url=url,
                            tokenizer=file,
                            num_prompts=prompts_at(level),
                            seed=level,  # each level's own prompts: none cached by another
                            random_input_len=INPUT_LEN,
                            random_output_len=OUTPUT_LEN,
                            max_concurrency=level,
                            num_warmups=1,
                            label=name,
                            metric_percentiles=(50.0, 99.0),
                            save_result=True,
                            plot=True,
                            result_dir=args.result_dir,
                        )
                    )
                    kept = best.get((name, level))
                    if kept is None or result["output_throughput"] > kept["output_throughput"]:
                        best[name, level] = result
    print(
        "\n| concurrency | server | req/s | output tok/s | TTFT mean / p99 ms "
        "| TPOT mean ms | ITL p50 / p99 ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for level in LEVELS:
        for name in sides:
            r = best[name, level]
            print(
                f"| {level} | {name} | {r['request_throughput']:.2f} | "
                f"{r['output_throughput']:.1f} | {r['mean_ttft_ms']:.0f} / {r['p99_ttft_ms']:.0f} "
                f"| {r['mean_tpot_ms']:.1f} | {r['p50_itl_ms']:.1f} / {r['p99_itl_ms']:.1f} |"
            )


if __name__ == "__main__":
    main()
