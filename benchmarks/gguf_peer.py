"""llmkit on a GGUF file's model against llama.cpp on the same file (issues 29 and 30).

    python benchmarks/gguf_peer.py --peer-python PEER_VENV/bin/python [--model smollm2] \
        [--variants native,float32,w8a8,w4a8] [--threads 2] [--repeat 3] [--prompt 512] \
        [--decode 128] [--streams 16,64] [--text tests/data/pride_and_prejudice_ch1.txt]

Variants of llmkit: ``native`` loads the file as it is (every type with a kernel: Q4_0/Q4_1,
Q5_0/Q5_1, Q8_0, Q4_K, Q5_K, Q6_K);
``float32``, ``w8a8`` and ``w4a8`` load a float32 HF folder made from the file (its weights
dequantized, once, into ~/.cache/llmkit/gguf-float32/), as ``quantization=`` would take a
checkpoint. Each side runs in a fresh process, so that its load time and peak RSS are its
own, and the sides alternate ``--repeat`` times (each keeps its best), so a busy machine
slows all alike. Measured: load (model and KV cache ready), prompt tok/s (one
``--prompt``-token prompt), single-stream decode tok/s (``--decode`` greedy tokens after a
16-token prompt, the prompt's time taken off), total tok/s of each ``--streams`` count
decoding at once, peak RSS; and the perplexity of ``--text`` (one window, deterministic:
measured once). Beside each decode rate, its share of the memory floor (``llmkit bench
roofline``'s: the bytes a step reads over this machine's measured bandwidth; llama.cpp's
against the native load's floor, the same file). All get the same token ids, decode greedily
without stopping, and size their KV cache for the same tokens (float16 on both sides: llmkit's
default for a quantized model on CPU since issue 45, llama.cpp's always). The llama.cpp side
is benchmarks/llama_cpp_side.py in ``--peer-python`` (llama-cpp-python, see RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDE = Path(__file__).with_name("llama_cpp_side.py")
# -> engine options. w4a8 in groups of 32, the file's own: at the default 128 SmolLM2's
# perplexity is 26.0 against float32's 18.9 (its activations have outlier channels).
FOLDER_VARIANTS = {
    "float32": {},
    "w8a8": {"quantization": "w8a8"},
    "w4a8": {"quantization": "w4a8", "quantization_group_size": 32},
}
PEER = "llama.cpp"


def jobs(prompt: int, decode: int, streams: list[int], seed: int = 0) -> dict:
    # Token ids below 30000: inside every vocabulary measured (the 1B-class Llama's is 32000).
    rng = random.Random(seed)
    ids = [rng.randrange(1000, 30000) for _ in range(prompt)]
    many = {
        str(n): [[[rng.randrange(1000, 30000) for _ in range(16)], decode] for _ in range(n)]
        for n in streams
    }
    per_seq = -(-max(prompt + 1, 16 + decode) // 256) * 256
    return {"prompt": ids, "decode": decode, "streams": many, "per_seq": per_seq}


def engine_kwargs(variant: str) -> dict:
    return FOLDER_VARIANTS.get(variant, {})


def peak_rss_mib() -> float:
    """This process's peak RSS since its exec (VmHWM: getrusage's ru_maxrss carries the
    spawning parent's peak across the exec, which made a small side look as big as its
    parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def llmkit_side(model: str, variant: str, spec: dict) -> dict:
    """What llama_cpp_side.py's ``profile`` measures, in this (fresh) process, and the bytes
    a decode step reads (for the floor)."""
    t0 = time.perf_counter()
    from llmkit import LLM, SamplingParams
    from llmkit.bench.roofline import _reads

    widest = max(len(batch) for batch in spec["streams"].values())
    llm = LLM(model, max_model_len=spec["per_seq"], max_num_seqs=widest, **engine_kwargs(variant))
    load = time.perf_counter() - t0

    def timed(batch: list[list]) -> float:
        prompts = [{"prompt_token_ids": p} for p, _ in batch]
        params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for _, n in batch]
        start = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        return time.perf_counter() - start

    head = spec["prompt"][:16]
    timed([[head, 4]])  # warm up
    prompt = timed([[spec["prompt"], 1]])
    single = timed([[head, spec["decode"] + 1]]) - timed([[head, 1]])
    many = {n: sum(k for _, k in batch) / timed(batch) for n, batch in spec["streams"].items()}
    weights, kv = _reads(llm)
    return {
        "load_s": load,
        "prompt_tok_s": len(spec["prompt"]) / prompt,
        "single_tok_s": spec["decode"] / single,
        "streams_tok_s": many,
        "peak_rss_mib": peak_rss_mib(),
        "reads": [weights, kv],
    }


def float32_folder(gguf: Path) -> Path:
    """The file's model as a float32 HF folder (weights dequantized by transformers' GGUF
    reader), made once."""
    from llmkit.model.demo import default_cache_dir

    out = default_cache_dir() / "gguf-float32" / gguf.stem
    if (out / "config.json").exists():
        return out
    import torch
    import transformers

    where = {"gguf_file": gguf.name}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        gguf.parent, dtype=torch.float32, **where
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, **where)
    config = model.config
    del config.quantization_config  # the GGUF reader's: a plain float32 model is saved
    plain = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _run(command: list[str]) -> dict:
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def best(runs: list[dict]) -> dict:
    """Each measure's best: lowest time and memory, highest rate."""
    first = runs[0]
    out = {
        k: (min if k in ("load_s", "peak_rss_mib") else max)(r[k] for r in runs)
        for k in first
        if k not in ("streams_tok_s", "reads")
    }
    out["streams_tok_s"] = {
        n: max(r["streams_tok_s"][n] for r in runs) for n in first["streams_tok_s"]
    }
    out["reads"] = first.get("reads")
    return out


def table(results: dict[str, dict], streams: list[int], bandwidth: float, context: int) -> str:
    """One row per side: load, prompt, each decode rate with its share of the floor, RSS,
    perplexity."""

    def floor(reads: list[int], n: int) -> float:
        weights, kv = reads
        return n * bandwidth / (weights + n * context * kv)

    counts = [1, *streams]
    head = ["side", "load s", "prompt tok/s", *(f"{n} stream{'s' * (n > 1)} tok/s" for n in counts)]
    lines = ["| " + " | ".join([*head, "peak RSS MiB", "perplexity"]) + " |"]
    lines.append("|---" + "|---:" * (len(head) + 1) + "|")
    native = results.get("native", {}).get("reads")
    for name, r in results.items():
        reads = r["reads"] or native
        rates = [r["single_tok_s"], *(r["streams_tok_s"][str(n)] for n in streams)]
        cells = [
            f"{rate:.1f} ({rate / floor(reads, n):.0%})" if reads else f"{rate:.1f}"
            for rate, n in zip(rates, counts)
        ]
        ppl = r.get("perplexity")
        lines.append(
            f"| {name} | {r['load_s']:.2f} | {r['prompt_tok_s']:.0f} | "
            + " | ".join(cells)
            + f" | {r['peak_rss_mib']:.0f} | {'' if ppl is None else f'{ppl:.4f}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer-python", help="an interpreter with llama-cpp-python")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--variants", default="native,float32,w8a8,w4a8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--decode", type=int, default=128)
    parser.add_argument("--streams", default="16,64")
    parser.add_argument(
        "--text", default=str(Path(__file__).parents[1] / "tests/data/pride_and_prejudice_ch1.txt")
    )
    parser.add_argument("--side", help=argparse.SUPPRESS)  # llmkit: run one measurement
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        spec = json.loads(Path(args.side).read_text())
        print(json.dumps(llmkit_side(args.model, args.variant, spec)))
        return
    from llmkit.bench.perplexity import measure_perplexity
    from llmkit.bench.roofline import memory_bandwidth
    from llmkit.model.gguf.cache import gguf_table
    from llmkit.model.names import resolve_model

    table_ = gguf_table(resolve_model(args.model))
    if table_ is None:
        raise SystemExit(f"{args.model} is not a GGUF file")
    gguf = Path(table_.file)
    variants = args.variants.split(",")
    models = {v: str(gguf if v == "native" else float32_folder(gguf)) for v in variants}
    streams = [int(n) for n in args.streams.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "jobs.json"
        spec_file.write_text(json.dumps(jobs(args.prompt, args.decode, streams)))
        commands = {
            v: [
                sys.executable,
                __file__,
                "--model",
                models[v],
                "--variant",
                v,
                "--side",
                str(spec_file),
            ]
            for v in variants
        }
        if args.peer_python:
            commands[PEER] = [
                args.peer_python,
                str(SIDE),
                "profile",
                str(gguf),
                str(spec_file),
                str(args.threads),
            ]
        runs: dict[str, list[dict]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():
                runs[name].append(_run(command))
    results = {name: best(r) for name, r in runs.items()}
    text = Path(args.text).read_text()
    for v in variants:
        results[v]["perplexity"] = measure_perplexity(models[v], text, engine_kwargs(v)).perplexity
    if args.peer_python:
        ppl = _run(
            [args.peer_python, str(SIDE), "perplexity", str(gguf), args.text, str(args.threads)]
        )
        results[PEER]["perplexity"] = ppl["perplexity"]
    bandwidth = memory_bandwidth()
    print(
        f"{gguf.name}; {args.threads} threads; best of {args.repeat} alternating runs; memory "
        f"bandwidth {bandwidth / 1e9:.1f} GB/s; decode rates with their share of the floor"
    )
    print(table(results, streams, bandwidth, 16 + args.decode // 2))


if __name__ == "__main__":
    main()
