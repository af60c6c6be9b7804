"""llmkit's native load of a GGUF file against llama.cpp on the same file (issue 29).

    python benchmarks/gguf_peer.py --peer-python PEER_VENV/bin/python [--model smollm2] \
        [--threads 2] [--repeat 3] [--prompt 512] [--decode 128] [--streams 16]

Each side runs in a fresh process, so that its load time and peak RSS are its own, and the
two alternate ``--repeat`` times (each keeps its best), so a busy machine slows both alike.
Measured: load (model and KV cache ready), prompt tok/s (one ``--prompt``-token prompt),
single-stream decode tok/s (``--decode`` greedy tokens after a 16-token prompt, the prompt's
time taken off), total tok/s of ``--streams`` streams decoding at once, and peak RSS. Both
get the same token ids, decode greedily without stopping, and size their KV cache for the
same tokens (llama.cpp keeps it in float16 by default, llmkit in float32). The llama.cpp side
is benchmarks/llama_cpp_side.py in ``--peer-python`` (llama-cpp-python, see RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDE = Path(__file__).with_name("llama_cpp_side.py")
KEYS = ("load_s", "prompt_tok_s", "single_tok_s", "streams_tok_s", "peak_rss_mib")


def jobs(prompt: int, decode: int, streams: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    ids = [rng.randrange(1000, 40000) for _ in range(prompt)]
    many = [[[rng.randrange(1000, 40000) for _ in range(16)], decode] for _ in range(streams)]
    per_seq = -(-max(prompt + 1, 16 + decode) // 256) * 256
    return {"prompt": ids, "decode": decode, "streams": many, "per_seq": per_seq}


def llmkit_side(model: str, spec: dict) -> dict:
    """What llama_cpp_side.py's ``profile`` measures, in this (fresh) process."""
    t0 = time.perf_counter()
    from llmkit import LLM, SamplingParams

    llm = LLM(model, max_model_len=spec["per_seq"], max_num_seqs=len(spec["streams"]))
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
    many = timed(spec["streams"])
    return {
        "load_s": load,
        "prompt_tok_s": len(spec["prompt"]) / prompt,
        "single_tok_s": spec["decode"] / single,
        "streams_tok_s": sum(n for _, n in spec["streams"]) / many,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _run(command: list[str]) -> dict:
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def best(runs: list[dict]) -> dict:
    """Each measure's best: lowest time and memory, highest rate."""
    return {k: (min if k in ("load_s", "peak_rss_mib") else max)(r[k] for r in runs) for k in KEYS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer-python", help="an interpreter with llama-cpp-python")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--decode", type=int, default=128)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--side", help=argparse.SUPPRESS)  # llmkit: run one measurement
    args = parser.parse_args()
    if args.side:
        print(json.dumps(llmkit_side(args.model, json.loads(Path(args.side).read_text()))))
        return
    from llmkit.model.gguf.cache import gguf_table
    from llmkit.model.names import resolve_model

    table = gguf_table(resolve_model(args.model))
    if table is None:
        raise SystemExit(f"{args.model} is not a GGUF file")
    gguf = str(table.file)
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "jobs.json"
        spec_file.write_text(json.dumps(jobs(args.prompt, args.decode, args.streams)))
        ours = [sys.executable, __file__, "--model", args.model, "--side", str(spec_file)]
        theirs = [args.peer_python, str(SIDE), "profile", gguf, str(spec_file), str(args.threads)]
        runs: dict[str, list[dict]] = {"llmkit": [], "llama.cpp": []}
        for _ in range(args.repeat):
            runs["llmkit"].append(_run(ours))
            runs["llama.cpp"].append(_run(theirs))
    results = {name: best(r) for name, r in runs.items()}
    print(f"{gguf}; {args.threads} threads; best of {args.repeat} alternating runs")
    print("| measure | llmkit | llama.cpp | llmkit / llama.cpp |")
    print("|---|---:|---:|---:|")
    for key in KEYS:
        a, b = results["llmkit"][key], results["llama.cpp"][key]
        print(f"| {key} | {a:.2f} | {b:.2f} | {a / b:.2f}x |")


if __name__ == "__main__":
    main()
