"""A long shared prefix and short new turns: time to first token from each tier of the
prompt cache, llmkit's server against llama-server on the same GGUF file.

    python benchmarks/prompt_cache.py --llama-cpp LLAMA_CPP_SRC [--file FILE.gguf] \
        [--prefix 3500] [--threads 2] [--repeat 2]

Every request is a completion of ``--prefix`` fixed token ids (the shared prefix: a system
prompt, tools, files) plus 24 new ones (the turn), one token generated, not streamed, token
ids sent as the prompt so both servers see the same tokens. Time to first token is the
request's wall time. Turns, in order, on each server:

- cold: a fresh server;
- pool: the next turn;
- host tier: after two other prompts of the prefix's length filled the KV pool (llmkit:
  ``--num-kv-blocks`` for 1.5 such prompts; llama-server: its one slot, and its host-memory
  prompt cache ``--cache-ram``, default 8 GiB);
- reload: after ``POST /models/unload`` (llmkit serves the file as a named model of its
  model manager, ``--model m=FILE``; the model's load, by a one-token request first, is
  reported beside it) -- llama-server has no unload;
- restart: after the server was stopped and started again (llmkit: its disk tier,
  ``--prompt-cache-dir``, the model unloaded and loaded again before the turn as in reload;
  llama-server keeps nothing across a restart by itself).

The servers run in turn, never together, with ``--threads`` threads each; the whole run
alternates the two sides ``--repeat`` times and keeps each case's best time.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
from hybrid_turns import _free_port, server

from llmkit.model.names import installed_gguf

CASES = ("cold", "pool", "host tier", "reload", "restart")


def _ids(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 40000) for _ in range(n)]


def _ttft(url: str, prompt: list[int]) -> float:
    body = {"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0.0}
    start = time.perf_counter()
    httpx.post(f"{url}/v1/completions", json=body, timeout=900).raise_for_status()
    return time.perf_counter() - start


def _reload(url: str) -> float:
    """Unload the model, then load it with a one-token request: the load's seconds."""
    httpx.post(f"{url}/models/unload", json={"model": "m"}, timeout=60).raise_for_status()
    return _ttft(url, [1000])


def run_side(argv, prefix: list[int], unload: bool) -> dict[str, float]:
    """``argv(port)``: the server's command line."""
    turn = iter(range(1, 100))
    times: dict[str, float] = {}

    def ask(url: str) -> float:
        return _ttft(url, prefix + _ids(24, next(turn)))

    port = _free_port()
    with server(argv(port), port) as url:
        times["cold"] = ask(url)
        times["pool"] = ask(url)
        for seed in (101, 102):
            _ttft(url, _ids(len(prefix), seed))
        times["host tier"] = ask(url)
        if unload:
            times["reload: load"] = _reload(url)
            times["reload"] = ask(url)
    port = _free_port()
    with server(argv(port), port) as url:
        if unload:
            times["restart: load"] = _reload(url)
        times["restart"] = ask(url)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp", required=True, type=Path)
    parser.add_argument("--file", type=Path, default=None)
    parser.add_argument("--prefix", type=int, default=3500)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    file = args.file or installed_gguf("smollm2")
    prefix = _ids(args.prefix, 0)
    context = args.prefix + 512
    cache_dir = tempfile.mkdtemp(prefix="llmkit-prompt-cache-")
    blocks = int(1.5 * context) // 16
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    sides = {
        "llama-server": (
            lambda port: [
                str(args.llama_cpp / "build/bin/llama-server"),
                *("-m", str(file), "-c", str(context), "-t", str(args.threads), "-np", "1"),
                *("--host", "127.0.0.1", "--port", str(port)),
            ],
            False,
        ),
        "llmkit": (
            lambda port: [
                sys.executable,
                *("-m", "llmkit.cli", "serve", "--model", f"m={file}"),
                *("--max-model-len", str(context), "--num-kv-blocks", str(blocks)),
                *("--prompt-cache-dir", cache_dir),
                *("--host", "127.0.0.1", "--port", str(port)),
            ],
            True,
        ),
    }
    results: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for name, (argv, unload) in sides.items():
            shutil.rmtree(cache_dir, ignore_errors=True)  # each run starts from no cache
            times = run_side(argv, prefix, unload)
            print(name, {k: round(v, 2) for k, v in times.items()}, flush=True)
            best = results.setdefault(name, times)
            for case, t in times.items():
                best[case] = min(best[case], t)
    ours, theirs = results["llmkit"], results["llama-server"]
    print(f"\n| {args.prefix}-token prefix, TTFT (s) | llmkit | of cold | llama-server | of cold |")
    print("|---|---|---|---|---|")
    for case in CASES:
        row = f"| {case} | {ours[case]:.2f} | {ours[case] / ours['cold']:.3f}x |"
        if case in theirs:
            row += f" {theirs[case]:.2f} | {theirs[case] / theirs['cold']:.3f}x |"
        else:
            row += " - | - |"
        print(row)
    for case in ("reload: load", "restart: load"):
        print(f"| {case} (unload, a one-token request) | {ours[case]:.2f} | | - | |")


if __name__ == "__main__":
    main()
