"""Where one engine step's time goes: linear layers, attention, sampling, batch building.

    python benchmarks/profile_step.py [--shape 150m|long] [--batch 32] [--quantization int8]

Builds the ~150M-parameter shape of issue 18 (hidden 1024, 12 layers, GQA 16/4, MLP 2816;
prompts 16..256 tokens) or its long-prompt shape (the demo model, prompts 768..1536), both
as benchmarks/peers.py defines them, queues ``--batch`` requests and runs them through
``LLM.generate`` with a token budget that prefills all of them in the first step. Timing
hooks split that prefill step and the decode steps that follow (all ``--batch`` sequences,
one token each) into: linear layers, attention (KV write + attention), the rest of the model
(norms, rope, activation, embedding), the lm_head, sampling, batch building (flattening the
step and making its tensors) and the engine around them (scheduler, outputs). Prints ms per
step and the share of each.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import torch
from peers import SHAPES, shape_model
from torch import nn

from llmkit import LLM, SamplingParams
from llmkit.bench.workload import token_jobs
from llmkit.model import runner as runner_module
from llmkit.model.layers.native import NativeLinear
from llmkit.model.layers.packed import PackedLinear
from llmkit.model.layers.quant import QuantizedLinear


class Timers:
    """Seconds per category, accumulated between ``reset`` calls."""

    def __init__(self) -> None:
        self.s: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.s[name] += time.perf_counter() - t0

        return timed

    def hook_module(self, name: str, module: nn.Module) -> None:
        start: list[float] = []
        module.register_forward_pre_hook(lambda *_: start.append(time.perf_counter()))

        def post(*_):
            self.s[name] += time.perf_counter() - start.pop()

        module.register_forward_hook(post)


def instrument(llm: LLM, timers: Timers) -> list[tuple[int, int, dict[str, float]]]:
    """Wrap the engine's parts; returns the list each step appends (tokens, seqs, times) to."""
    core = llm._core
    runner = core.runner
    model = runner.model
    head = getattr(model, "lm_head", None)
    for module in model.modules():
        if (
            isinstance(module, nn.Linear | PackedLinear | QuantizedLinear | NativeLinear)
            and module is not head
        ):
            timers.hook_module("linear", module)
    timers.hook_module("model", model)
    backend = runner.backend
    backend.forward = timers.wrap("attention", backend.forward)
    backend.write_kv = timers.wrap("attention", backend.write_kv)
    runner.execute = timers.wrap("execute", runner.execute)
    runner.compute_logits = timers.wrap("lm_head", runner.compute_logits)
    core.sampler = timers.wrap("sampling", core.sampler)
    shape: list[int] = []
    flatten = runner_module.flatten

    def counted(seqs, bs):
        shape[:] = [sum(len(s.token_ids) for s in seqs), len(seqs)]
        return flatten(seqs, bs)

    runner_module.flatten = counted
    steps: list[tuple[int, int, dict[str, float]]] = []
    step = core.step

    def timed_step():
        timers.s.clear()
        t0 = time.perf_counter()
        out = step()
        total = time.perf_counter() - t0
        if shape:
            s = dict(timers.s)
            parts = {
                "linear layers": s.get("linear", 0.0),
                "attention": s.get("attention", 0.0),
                "rest of the model": s.get("model", 0.0)
                - s.get("linear", 0.0)
                - s.get("attention", 0.0),
                "lm_head": s.get("lm_head", 0.0),
                "sampling": s.get("sampling", 0.0),
                "batch building": s.get("execute", 0.0) - s.get("model", 0.0),
                "engine (scheduler, outputs)": total
                - s.get("execute", 0.0)
                - s.get("lm_head", 0.0)
                - s.get("sampling", 0.0),
            }
            steps.append((shape[0], shape[1], parts))
            shape.clear()
        return out

    core.step = timed_step
    return steps


def report(title: str, steps: list[tuple[int, int, dict[str, float]]]) -> None:
    if not steps:
        return
    n = len(steps)
    tokens = sum(t for t, _, _ in steps) / n
    seqs = sum(b for _, b, _ in steps) / n
    parts = {k: sum(p[k] for _, _, p in steps) / n for k in steps[0][2]}
    total = sum(parts.values())
    print(f"{title}: {n} step(s), {tokens:.0f} tokens, {seqs:.0f} sequences; {1e3 * total:.1f} ms")
    for name, sec in parts.items():
        print(f"  {name:<28} {1e3 * sec:8.2f} ms  {100 * sec / total:5.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("150m", "long"), default="150m")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--decode-steps", type=int, default=16)
    parser.add_argument("--quantization", default=None)
    args = parser.parse_args()
    spec, _, prompt_len, _ = SHAPES[args.shape]
    path = shape_model(args.shape)
    vocab = json.loads((path / "config.json").read_text())["vocab_size"]
    prompts = [{"prompt_token_ids": p} for p, _ in token_jobs(args.batch, vocab, prompt_len)]
    budget = sum(len(p["prompt_token_ids"]) for p in prompts)
    kwargs = {"quantization": args.quantization} if args.quantization else {}
    llm = LLM(str(path), max_num_batched_tokens=max(budget, 2048), **kwargs)
    params = SamplingParams(temperature=0, max_tokens=args.decode_steps + 1, ignore_eos=True)
    llm.generate(prompts[:2], params, use_tqdm=False)  # warm up
    steps = instrument(llm, Timers())
    llm.generate(prompts, params, use_tqdm=False)
    print(
        f"shape {args.shape} (hidden {spec.hidden_size}, {spec.num_layers} layers, GQA "
        f"{spec.num_heads}/{spec.num_kv_heads}, MLP {spec.intermediate_size}), prompts "
        f"{prompt_len[0]}..{prompt_len[1]}, batch {args.batch}, quantization "
        f"{args.quantization}; torch threads {torch.get_num_threads()}"
    )
    report("prefill step", [s for s in steps if s[0] > s[1]][:1])
    report("decode step (mean)", [s for s in steps if s[0] == s[1] == args.batch])


if __name__ == "__main__":
    main()
