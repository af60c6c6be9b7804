"""Offline throughput: llmkit `LLM.generate` vs HF `generate`, same model and workload.

    python benchmarks/throughput.py [--model demo] [--num-requests 64]

Prints output tokens/s for both and their ratio, the workload's compute floor (matmul
FLOPs over this machine's measured GEMM rate) and the share of llmkit's wall time spent
outside the model forward (engine overhead).
"""

from __future__ import annotations

import argparse
import time

import torch

from llmkit import LLM, SamplingParams
from llmkit.bench.workload import Jobs, token_jobs
from llmkit.model.demo import resolve_model


def workload(n: int, vocab: int, seed: int = 0) -> Jobs:
    return token_jobs(n, vocab, (16, 256), (16, 256), seed)


def gemm_rate() -> float:
    """This machine's fp32 matmul rate in FLOP/s, on a shape like the model's layers."""
    a, b = torch.randn(256, 512), torch.randn(512, 1536)
    for _ in range(3):
        a @ b
    reps, t0 = 200, time.perf_counter()
    for _ in range(reps):
        a @ b
    return reps * 2 * 256 * 512 * 1536 / (time.perf_counter() - t0)


def workload_flops(hf_config, jobs) -> float:
    """Matmul FLOPs: weights for every token computed, plus attention scores and values."""
    c = hf_config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    q, kv = c.num_attention_heads * head_dim, c.num_key_value_heads * head_dim
    per_layer = (
        c.hidden_size * (q + 2 * kv) + q * c.hidden_size + 3 * c.hidden_size * c.intermediate_size
    )
    weights = c.num_hidden_layers * per_layer + c.hidden_size * c.vocab_size
    total = 0.0
    for prompt, out in jobs:
        tokens = len(prompt) + out
        total += 2 * weights * tokens
        # causal attention: each position attends to the ones before it, QK^T and PV
        total += c.num_hidden_layers * 2 * 2 * q * tokens * tokens / 2
    return total


def run_llmkit(model: str, jobs) -> tuple[float, float]:
    llm = LLM(model)
    runner = llm._core.runner
    forward = {"s": 0.0}
    for name in ("execute", "compute_logits"):
        original = getattr(runner, name)

        def timed(*args, _f=original, **kw):
            t0 = time.perf_counter()
            try:
                return _f(*args, **kw)
            finally:
                forward["s"] += time.perf_counter() - t0

        setattr(runner, name, timed)
    prompts = [{"prompt_token_ids": p} for p, _ in jobs]
    params = [SamplingParams(temperature=0, max_tokens=o, ignore_eos=True) for _, o in jobs]
    llm.generate(prompts[:4], params[:4], use_tqdm=False)  # warm up
    forward["s"] = 0.0
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    assert sum(len(o.outputs[0].token_ids) for o in outs) == sum(o for _, o in jobs)
    return wall, forward["s"]


def run_hf(model: str, jobs, batch_size: int) -> float:
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None
    t0 = time.perf_counter()
    for i in range(0, len(jobs), batch_size):
        batch = jobs[i : i + batch_size]
        width = max(len(p) for p, _ in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for j, (p, _) in enumerate(batch):  # left padding, as HF wants for generation
            ids[j, width - len(p) :] = torch.tensor(p)
            mask[j, width - len(p) :] = 1
        with torch.inference_mode():
            hf.generate(
                ids,
                attention_mask=mask,
                do_sample=False,
                pad_token_id=0,
                max_new_tokens=max(o for _, o in batch),
            )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--hf-batch-sizes", default="8,16,32,64")
    args = parser.parse_args()
    model = resolve_model(args.model)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model)
    jobs = workload(args.num_requests, config.vocab_size)
    useful = sum(o for _, o in jobs)
    print(
        f"model {args.model}: {config.num_hidden_layers} layers, hidden {config.hidden_size}; "
        f"{len(jobs)} requests, {sum(len(p) for p, _ in jobs)} prompt and {useful} output tokens; "
        f"torch threads {torch.get_num_threads()}"
    )

    wall, forward = run_llmkit(model, jobs)
    ours = useful / wall
    print(
        f"llmkit:  {ours:8.1f} output tok/s  ({wall:.2f} s; outside the forward: "
        f"{100 * (wall - forward) / wall:.1f}%)"
    )

    best = None
    for bs in (int(b) for b in args.hf_batch_sizes.split(",")):
        t = run_hf(model, jobs, bs)
        print(f"HF bs={bs:<3} {useful / t:8.1f} output tok/s  ({t:.2f} s)")
        best = t if best is None else min(best, t)
    hf_rate = useful / best
    floor = workload_flops(config, jobs) / gemm_rate()
    print(f"ratio llmkit / best HF: {ours / hf_rate:.2f}x")
    print(
        f"compute floor {floor:.2f} s: llmkit reaches {100 * floor / wall:.0f}%, "
        f"HF {100 * floor / best:.0f}% of it"
    )


if __name__ == "__main__":
    main()
