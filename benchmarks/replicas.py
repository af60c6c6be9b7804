"""Engine replicas on a local Ray cluster: throughput of 2 replicas against 1.

    python benchmarks/replicas.py [--model demo] [--num-requests 32] [--num-cpus 2]

Starts a local Ray cluster, serves the same concurrent greedy workload through a
``ReplicaGroup`` of 1 replica and then of 2 (each an actor with one CPU, so one torch
thread), and prints output tokens/s for each, their ratio, and the share of a core the
routing process (this one: Ray's client side of every stream) used.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import ray

from llmkit import EngineConfig, SamplingParams
from llmkit.bench.workload import token_jobs
from llmkit.model.loader import load_hf_config
from llmkit.model.names import resolve_model
from llmkit.replicas import ReplicaGroup


async def serve_all(group: ReplicaGroup, jobs, params: SamplingParams) -> tuple[float, int, float]:
    """Seconds, output tokens, and this process's CPU share (the router's cost)."""

    async def one(prompt: list[int]) -> int:
        async for out in group.generate({"prompt_token_ids": prompt}, params):
            last = out
        return len(last.outputs[0].token_ids)

    async with group:
        await one(jobs[0])  # warm up
        t0, cpu0 = time.perf_counter(), time.process_time()
        tokens = await asyncio.gather(*(one(p) for p in jobs))
        seconds = time.perf_counter() - t0
        return seconds, sum(tokens), (time.process_time() - cpu0) / seconds


def run(model: str, replicas: int, jobs, params: SamplingParams) -> tuple[float, int, float]:
    group = ReplicaGroup(EngineConfig(model, max_model_len=512), replicas, prefix_tokens=0)
    return asyncio.run(serve_all(group, jobs, params))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--num-requests", type=int, default=32)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()
    model = resolve_model(args.model)
    vocab = load_hf_config(model).vocab_size
    length = (args.prompt_len, args.prompt_len)
    jobs = [p for p, _ in token_jobs(args.num_requests, vocab, length)]
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    try:
        results = {n: run(model, n, jobs, params) for n in (1, 2)}
    finally:
        ray.shutdown()
    print("| replicas | seconds | output tok/s | router process CPU |")
    print("|---:|---:|---:|---:|")
    rates = {}
    for n, (seconds, tokens, cpu) in results.items():
        rates[n] = tokens / seconds
        print(f"| {n} | {seconds:.2f} | {rates[n]:.1f} | {100 * cpu:.0f}% |")
    print(f"\n2 replicas / 1: {rates[2] / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
