"""Single-stream decode at depth: llmkit against ``llama-bench -n 32 -d DEPTH`` on the same
GGUF file (issue 55).

    python benchmarks/decode_depth.py --llama-cpp LLAMA_CPP_SRC --model FILE [FILE ...] \
        [--depths 512,4096,8192] [--tokens 32] [--threads 2] [--repeat 3]

Per file and depth: llmkit's decode tok/s over TOKENS greedy tokens after a prompt of DEPTH
tokens (at least 1; a fresh process; the prompt prefilled once, then read from the prefix
cache, so the timed requests are decode: TOKENS + 1 tokens minus 1 token), and llama-bench's
``tgTOKENS`` at ``-d DEPTH`` (its default float16 KV cache, as llmkit's; ``--depths 0
--tokens 128`` is its ``tg128``), alternating the two sides, each its best of ``--repeat``.
``LLAMA_CPP_SRC`` has ``llama-bench`` built in ``build/bin``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

LLMKIT = """
import sys, time
from llmkit import LLM, SamplingParams
file, depth, tokens = sys.argv[1], max(int(sys.argv[2]), 1), int(sys.argv[3])
llm = LLM(file, max_model_len=depth + tokens + 32)
prompt = [{"prompt_token_ids": [100 + (i * 7919) % 20000 for i in range(depth)]}]
def run(n):
    params = SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    start = time.perf_counter()
    llm.generate(prompt, params, use_tqdm=False)
    return time.perf_counter() - start
run(1)  # the prompt, prefilled once; the runs below read it from the prefix cache
print(tokens / min(run(tokens + 1) - run(1) for _ in range(2)))
"""


def llmkit_decode(file: Path, depth: int, tokens: int) -> float:
    argv = [sys.executable, "-c", LLMKIT, str(file), str(depth), str(tokens)]
    done = subprocess.run(argv, check=True, capture_output=True)
    return float(done.stdout.decode().strip().splitlines()[-1])


def llama_bench(file: Path, depth: int, tokens: int, src: Path, threads: int) -> float:
    tool = str(src / "build/bin/llama-bench")
    args = [tool, "-m", str(file), "-t", str(threads), "-p", "0", "-n", str(tokens)]
    args += ["-d", str(depth)]
    done = subprocess.run([*args, "-r", "1", "-o", "json"], check=True, capture_output=True)
    return float(json.loads(done.stdout)[0]["avg_ts"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp", required=True, type=Path)
    parser.add_argument("--model", required=True, type=Path, nargs="+")
    parser.add_argument("--depths", default="512,4096,8192")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"| file | depth | llmkit tok/s | llama-bench tg{args.tokens} @ d | ratio |")
    print("|---|---:|---:|---:|---:|")
    for file in args.model:
        for depth in map(int, args.depths.split(",")):
            ours = peer = 0.0
            for _ in range(args.repeat):  # alternating, each side its best
                ours = max(ours, llmkit_decode(file, depth, args.tokens))
                bench = llama_bench(file, depth, args.tokens, args.llama_cpp, args.threads)
                peer = max(peer, bench)
            print(
                f"| {file.name} | {depth} | {ours:.1f} | {peer:.1f} | {ours / peer:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
