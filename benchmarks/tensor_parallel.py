"""Tensor parallelism on CPU: step time at tensor_parallel_size=2 (gloo) against 1.

    python benchmarks/tensor_parallel.py [--model demo] [--num-requests 16]

Runs the same greedy workload through `LLM.generate` at each size and prints the mean
time of a model forward for prefill and decode steps, their ratio, and, at size 2, the
time rank 0 spends in gloo all-reduces per step and per layer (which includes waiting for
the other rank to get there). Rank 0 runs one torch thread, and a worker takes cores /
size (one on two cores): size 2 uses two cores where size 1 uses one, as two GPUs
against one. Last, the bare gloo all-reduce latency of
a decode step's activations ([16, hidden] float32) between two processes.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import torch

from llmkit import LLM, SamplingParams
from llmkit.bench.workload import token_jobs
from llmkit.executor.group import join_group, make_group, open_store
from llmkit.model.loader import load_hf_config
from llmkit.model.names import resolve_model


class Timed:
    """A process group that times its all-reduces (the collectives of the forward)."""

    def __init__(self, group):
        self.group, self.calls, self.seconds = group, 0, 0.0

    def allreduce(self, tensors, *args):
        t0 = time.perf_counter()
        self.group.allreduce(tensors, *args).wait()
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return _Done()

    def __getattr__(self, name):
        return getattr(self.group, name)


class _Done:
    def wait(self) -> None:
        pass


def run(model: str, size: int, jobs, max_tokens: int) -> dict[str, float]:
    llm = LLM(model, tensor_parallel_size=size, max_model_len=512)
    runner = llm._core.runner
    tp = runner.model.model.embed_tokens.tp
    timed = Timed(tp.group) if tp.group is not None else None
    if timed is not None:
        object.__setattr__(tp, "group", timed)  # every layer holds this same TensorParallel
    times: dict[str, list[float]] = {"prefill": [], "decode": [], "logits": []}
    execute, logits = runner.execute, runner.compute_logits

    def step(seqs):
        t0 = time.perf_counter()
        hidden = execute(seqs)
        kind = "decode" if all(len(s.token_ids) == 1 for s in seqs) else "prefill"
        times[kind].append(time.perf_counter() - t0)
        return hidden

    def head(hidden):
        t0 = time.perf_counter()
        out = logits(hidden)
        times["logits"].append(time.perf_counter() - t0)
        return out

    runner.execute, runner.compute_logits = step, head
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    prompts = [{"prompt_token_ids": p} for p in jobs]
    llm.generate(prompts[:2], params, use_tqdm=False)  # warm up
    for kept in times.values():
        kept.clear()
    if timed is not None:
        timed.calls, timed.seconds = 0, 0.0
    t0 = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    prefill, decode, head_times = times["prefill"], times["decode"], times["logits"]
    num_steps = len(prefill) + len(decode)
    layers = runner.model.num_layers
    result = {
        "wall": wall,
        "prefill_ms": 1e3 * sum(prefill) / len(prefill),
        "decode_ms": 1e3 * sum(decode) / len(decode),
        "logits_ms": 1e3 * sum(head_times) / len(head_times),
        "steps": num_steps,
    }
    if timed is not None:
        result["allreduce_ms_per_step"] = 1e3 * timed.seconds / num_steps
        result["allreduces_per_step"] = timed.calls / num_steps
        result["allreduce_ms_per_layer"] = result["allreduce_ms_per_step"] / layers
    llm.close()
    return result


def _peer(port: int, shape: tuple[int, int], reps: int) -> None:
    tp = join_group(1, 2, port, cuda=False)
    x = torch.ones(shape)
    for _ in range(reps + 10):
        tp.all_reduce(x)


def allreduce_latency(shape: tuple[int, int], reps: int = 2000) -> float:
    """Seconds per gloo all-reduce of a ``shape`` float32 tensor between two processes."""
    store = open_store(2)
    peer = multiprocessing.get_context("spawn").Process(
        target=_peer, args=(store.port, shape, reps)
    )
    peer.start()
    tp = make_group(store, 0, 2, cuda=False)
    x = torch.ones(shape)
    for _ in range(10):
        tp.all_reduce(x)
    t0 = time.perf_counter()
    for _ in range(reps):
        tp.all_reduce(x)
    seconds = (time.perf_counter() - t0) / reps
    peer.join()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--num-requests", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    model = resolve_model(args.model)
    vocab = load_hf_config(model).vocab_size
    length = (args.prompt_len, args.prompt_len)
    jobs = [p for p, _ in token_jobs(args.num_requests, vocab, length)]
    torch.set_num_threads(1)
    one = run(model, 1, jobs, args.max_tokens)
    two = run(model, 2, jobs, args.max_tokens)
    hidden = load_hf_config(model).hidden_size
    bare = allreduce_latency((16, hidden))
    print("| tensor_parallel_size | wall s | prefill forward ms | decode forward ms | LM head ms |")
    print("|---:|---:|---:|---:|---:|")
    for size, r in ((1, one), (2, two)):
        print(
            f"| {size} | {r['wall']:.2f} | {r['prefill_ms']:.1f} | {r['decode_ms']:.1f} | "
            f"{r['logits_ms']:.2f} |"
        )
    print(
        f"\nTP=2 / TP=1 step time: prefill {two['prefill_ms'] / one['prefill_ms']:.2f}x, "
        f"decode {two['decode_ms'] / one['decode_ms']:.2f}x; wall {two['wall'] / one['wall']:.2f}x"
    )
    print(
        f"gloo all-reduce at TP=2 (rank 0): {two['allreduce_ms_per_step']:.2f} ms per step "
        f"({two['allreduces_per_step']:.0f} calls), {two['allreduce_ms_per_layer']:.3f} ms per "
        "layer"
    )
    print(f"bare gloo all-reduce of [16, {hidden}] float32: {1e6 * bare:.0f} us")


if __name__ == "__main__":
    main()
