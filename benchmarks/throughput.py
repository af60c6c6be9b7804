"""Offline throughput: llmkit `LLM.generate` vs HF `generate`, same model and workload.

    python benchmarks/throughput.py [--model demo|qwen2.5-0.5b|PATH] [--num-requests 64]
        [--dtype auto|float32|bfloat16|float16]

Runs on CUDA when there is a GPU (both sides), else on the CPU. Prints output tokens/s
for both and their ratio, the workload's compute floor (matmul FLOPs over this device's
measured GEMM rate in the same dtype) and where llmkit's wall time goes: on the CPU, the
share outside the model forward; on CUDA, the share during which the GPU runs no kernel
(scheduling, batch building, launches, sampling on the host), from a profiled second run,
and the host's time per step by phase: scheduling, launching the step (batch building,
copies, kernel launches, sampling queued), waiting for its tokens, and handling them
(detokenizing, stop checks, outputs). With async scheduling the wait is where the host
has nothing left to do before the GPU does.
``qwen2.5-0.5b`` is a random-weight model of that shape (vocabulary 151936), built locally.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import time
import warnings

import torch

from llmkit import LLM, SamplingParams
from llmkit.bench.workload import Jobs, token_jobs
from llmkit.model.demo import ModelSpec, build_model, default_cache_dir
from llmkit.model.names import resolve_model
from llmkit.model.sampler import Sampled

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# Qwen2.5-0.5B's shape: 24 layers, hidden 896, 14 query / 2 KV heads of 64, tied embeddings.
QWEN_05B = ModelSpec(
    architecture="qwen2",
    hidden_size=896,
    num_layers=24,
    num_heads=14,
    num_kv_heads=2,
    intermediate_size=4864,
    vocab_size=151936,
    max_position_embeddings=4096,
    rope_theta=1e6,
    initializer_range=0.02,
)


def model_path(name: str) -> str:
    if name == "qwen2.5-0.5b":
        return str(build_model(default_cache_dir() / "bench-qwen2.5-0.5b", QWEN_05B))
    return resolve_model(name)


def workload(n: int, vocab: int, seed: int = 0) -> Jobs:
    return token_jobs(n, vocab, (16, 256), (16, 256), seed)


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def gemm_rate(dtype: torch.dtype) -> float:
    """This device's matmul rate in FLOP/s in ``dtype``, on a shape like a model layer's."""
    m, k, n = (256, 512, 1536) if DEVICE.type == "cpu" else (4096, 4096, 4096)
    a = torch.randn(m, k, device=DEVICE, dtype=dtype)
    b = torch.randn(k, n, device=DEVICE, dtype=dtype)
    for _ in range(3):
        a @ b
    sync()
    reps, t0 = 200, time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return reps * 2 * m * k * n / (time.perf_counter() - t0)


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


def gpu_busy_seconds(llm: LLM, prompts, params) -> tuple[float, float]:
    """(wall s, s with a kernel or copy running on the GPU) of one more profiled run."""
    from torch.profiler import DeviceType, ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        sync()
        wall = time.perf_counter() - t0
    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == DeviceType.CUDA
    )
    busy, end = 0, 0
    for start, stop in spans:  # the union of the intervals, in µs
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return wall, busy * 1e-6


PHASES = ("schedule", "launch", "wait", "finish", "inputs", "execute", "replay", "logits", "sample")


def time_phases(llm: LLM) -> dict[str, float]:
    """Wrap the core's step phases in timers; returns the seconds they add up to (``finish``
    includes ``wait``, the host blocked on the step's tokens)."""
    core, spent = llm._core, dict.fromkeys(PHASES, 0.0)

    def timed(owner, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - t0

        setattr(owner, name, wrapper)

    timed(core.scheduler, "schedule", "schedule")
    timed(core, "_launch", "launch")
    timed(core, "_finish", "finish")
    timed(Sampled, "tokens", "wait")
    # The launch's parts: the step's inputs, the forward (a graph's replay in it), logits,
    # sampling queued.
    timed(core.encoder, "seq_inputs", "inputs")
    timed(core.runner, "execute", "execute")
    if core.runner.graphs is not None:
        timed(core.runner.graphs, "replay", "replay")
    timed(core.runner, "compute_logits", "logits")
    timed(core.sampler, "sample", "sample")
    return spent


def run_llmkit(
    model: str,
    jobs,
    dtype: str,
    host_profile: int = 0,
    enforce_eager: bool = False,
    async_scheduling: bool | None = None,
    sync_debug: bool = False,
) -> tuple[float, float, int, torch.dtype]:
    """(wall s, s in the forward on CPU or with the GPU busy on CUDA, steps, the dtype).

    ``host_profile``: also print the functions with the most own time (cProfile) in one
    more run.
    """
    llm = LLM(model, dtype=dtype, enforce_eager=enforce_eager, async_scheduling=async_scheduling)
    print(f"async scheduling: {'on' if llm._core.async_scheduling else 'off'}")
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
    # Warm up. On CUDA with the whole workload: Triton compiles a kernel variant for each
    # new class of shapes it meets, which would otherwise land in the timed run of
    # whichever process runs first (on the H200 that was worth ~0.7 s of a 2-4 s run).
    warm = len(prompts) if DEVICE.type == "cuda" else 4
    llm.generate(prompts[:warm], params[:warm], use_tqdm=False)
    forward["s"] = 0.0
    steps = llm.stats().steps
    phases = time_phases(llm)
    with contextlib.ExitStack() as stack:
        if sync_debug and DEVICE.type == "cuda":
            # Every operation that makes the host wait for the GPU warns, from its line.
            caught = stack.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            stack.callback(torch.cuda.set_sync_debug_mode, "default")
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        sync()
        wall = time.perf_counter() - t0
    if sync_debug and DEVICE.type == "cuda":
        sites = collections.Counter(f"{w.filename}:{w.lineno}" for w in caught)
        print(f"host waits for the GPU: {sum(sites.values())}, at {sites.most_common(12)}")
    steps = llm.stats().steps - steps
    ms = {k: 1e3 * v / steps for k, v in phases.items()}
    print(
        "host per step: "
        + ", ".join(f"{k} {ms[k]:.2f} ms" for k in ("schedule", "launch", "wait"))
        + f", handling tokens {ms['finish'] - ms['wait']:.2f} ms, other "
        f"{1e3 * wall / steps - ms['schedule'] - ms['launch'] - ms['finish']:.2f} ms; "
        "the launch: "
        + ", ".join(
            f"{k} {ms[k]:.2f} ms" for k in ("inputs", "execute", "replay", "logits", "sample")
        )
    )
    assert sum(len(o.outputs[0].token_ids) for o in outs) == sum(o for _, o in jobs)
    if host_profile:
        import cProfile
        import pstats

        with cProfile.Profile() as prof:
            llm.generate(prompts, params, use_tqdm=False)
        pstats.Stats(prof).sort_stats("tottime").print_stats(host_profile)
    if DEVICE.type == "cuda":
        profiled_wall, busy = gpu_busy_seconds(llm, prompts, params)
        return wall, busy * wall / profiled_wall, steps, runner.dtype
    return wall, forward["s"], steps, runner.dtype


def run_hf(model: str, jobs, batch_size: int, dtype: torch.dtype) -> float:
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(DEVICE).eval()
    hf.generation_config.eos_token_id = None
    sync()
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
                ids.to(DEVICE),
                attention_mask=mask.to(DEVICE),
                do_sample=False,
                pad_token_id=0,
                max_new_tokens=max(o for _, o in batch),
            )
    sync()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--hf-batch-sizes", default="8,16,32,64")
    parser.add_argument("--dtype", default="auto", help="llmkit's; HF runs in the same")
    parser.add_argument(
        "--host-profile",
        type=int,
        default=0,
        metavar="N",
        help="print the N functions with the most own time in a cProfile'd llmkit run",
    )
    parser.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
    parser.add_argument(
        "--sync-debug",
        action="store_true",
        help="count where the timed run's host waits for the GPU (torch's sync debug mode)",
    )
    parser.add_argument(
        "--async-scheduling",
        choices=("auto", "on", "off"),
        default="auto",
        help="llmkit's async scheduling (auto: on for CUDA)",
    )
    args = parser.parse_args()
    model = model_path(args.model)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model)
    jobs = workload(args.num_requests, config.vocab_size)
    useful = sum(o for _, o in jobs)
    where = torch.cuda.get_device_name() if DEVICE.type == "cuda" else "CPU"
    print(
        f"model {args.model}: {config.num_hidden_layers} layers, hidden {config.hidden_size}; "
        f"{len(jobs)} requests, {sum(len(p) for p, _ in jobs)} prompt and {useful} output tokens; "
        f"{where}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    overlap = {"auto": None, "on": True, "off": False}[args.async_scheduling]
    wall, inside, steps, dtype = run_llmkit(
        model, jobs, args.dtype, args.host_profile, args.enforce_eager, overlap, args.sync_debug
    )
    ours = useful / wall
    outside = "the GPU idle" if DEVICE.type == "cuda" else "outside the forward"
    print(
        f"llmkit:  {ours:8.1f} output tok/s  ({wall:.2f} s, {steps} steps of "
        f"{1e3 * wall / steps:.2f} ms; {outside}: {100 * (wall - inside) / wall:.1f}%)"
    )

    # HF in the dtype llmkit chose, so both sides compute alike.
    if not args.hf_batch_sizes:
        return
    best = None
    for bs in (int(b) for b in args.hf_batch_sizes.split(",")):
        t = run_hf(model, jobs, bs, dtype)
        print(f"HF bs={bs:<3} {useful / t:8.1f} output tok/s  ({t:.2f} s)")
        best = t if best is None else min(best, t)
    hf_rate = useful / best
    floor = workload_flops(config, jobs) / gemm_rate(dtype)
    print(f"ratio llmkit / best HF: {ours / hf_rate:.2f}x")
    print(
        f"compute floor {floor:.2f} s: llmkit reaches {100 * floor / wall:.0f}%, "
        f"HF {100 * floor / best:.0f}% of it"
    )


if __name__ == "__main__":
    main()
