"""The GGUF files people download, made by llama.cpp's own tools, and llama-bench on each
against llmkit's load and decode (issue 45).

    python benchmarks/kquant_files.py --llama-cpp LLAMA_CPP_SRC [--out DIR] \
        [--models smollm2,llama1b] [--types Q4_K_M,Q5_K_M,Q6_K,Q8_0] [--threads 2] [--repeat 3]

``LLAMA_CPP_SRC`` is llama.cpp's source (the llama-cpp-python sdist's ``vendor/llama.cpp``)
with ``llama-quantize`` and ``llama-bench`` built in ``build/bin``. ``smollm2``: its Q4_1
file's float32 HF folder (:func:`gguf_peer.float32_folder`) converted to F16 by llama.cpp's
``convert_hf_to_gguf.py``; ``llama1b``: a random-weight Llama of 1B-class shape (22 layers,
hidden 2048, intermediate 5632, 32 heads, 4 KV heads, vocabulary 32000, context 8192), whose
weights do not fit in a CPU's cache. Each F16 file is quantized by ``llama-quantize`` to
``--types``. Per file: llmkit's load (an empty cache for the file: metadata, tokenizer,
packed weights; the C kernels already built) and a second load; its single-stream decode
tok/s (128 greedy tokens after 16, each in a fresh process, best of ``--repeat``,
alternating with llama-bench), and llama-bench's ``pp512`` and ``tg128`` at ``--threads``.
The 16-stream rates, peak RSS and perplexity against llama.cpp come from
``benchmarks/gguf_peer.py --model FILE --variants native``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
LLAMA1B = {
    "architecture": "llama",
    "hidden_size": 2048,
    "num_layers": 22,
    "num_heads": 32,
    "num_kv_heads": 4,
    "intermediate_size": 5632,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,  # decode at 4,000 tokens of depth (decode_depth.py)
    "tie_word_embeddings": False,
    "initializer_range": 0.02,
}


def f16_file(model: str, src: Path, out: Path) -> Path:
    """``model``'s F16 GGUF, converted once by llama.cpp's converter."""
    target = out / f"{model}-F16.gguf"
    if target.exists():
        return target
    if model == "smollm2":
        sys.path.insert(0, str(HERE))
        from gguf_peer import float32_folder

        from llmkit.model.names import installed_gguf

        folder = float32_folder(installed_gguf("smollm2"))
    else:
        from llmkit.model.demo import ModelSpec, build_model

        folder = build_model(out / f"{model}-hf", ModelSpec(**LLAMA1B))  # type: ignore[arg-type]
    env = {**os.environ, "PYTHONPATH": f"{src / 'gguf-py'}:{src}"}
    argv = [str(src / "convert_hf_to_gguf.py"), str(folder), "--outtype", "f16"]
    subprocess.run(
        [sys.executable, "-c", _CONVERT, *argv, "--outfile", str(target)], check=True, env=env
    )
    return target


# The converter, taking a tokenizer it does not know (the random model's, trained locally)
# for GPT-2's pre-tokenizer, as benchmarks/llama_cpp_side.py does.
_CONVERT = """
import runpy, sys
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def quantized(f16: Path, qtype: str, src: Path, threads: int) -> Path:
    target = f16.with_name(f16.name.replace("F16", qtype))
    if not target.exists():
        tool = str(src / "build/bin/llama-quantize")
        subprocess.run([tool, str(f16), str(target), qtype, str(threads)], check=True)
    return target


def llama_bench(file: Path, src: Path, threads: int) -> dict[str, float]:
    tool = str(src / "build/bin/llama-bench")
    args = [tool, "-m", str(file), "-t", str(threads), "-p", "512", "-n", "128", "-r", "1"]
    rows = json.loads(subprocess.run([*args, "-o", "json"], check=True, capture_output=True).stdout)
    return {("pp512" if r["n_prompt"] else "tg128"): r["avg_ts"] for r in rows}


def llmkit_load(file: Path) -> float:
    """Seconds from a fresh process's start to its engine ready."""
    code = (
        "import time, sys; t = time.perf_counter(); from llmkit import LLM; "
        "LLM(sys.argv[1], max_model_len=512); print(time.perf_counter() - t)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(file)], check=True, capture_output=True)
    return float(done.stdout.decode().strip().splitlines()[-1])


def llmkit_decode(file: Path) -> float:
    """Single-stream decode tok/s: 128 greedy tokens after a 16-token prompt, in a fresh
    process (the prompt's time taken off)."""
    code = """
import sys, time
from llmkit import LLM, SamplingParams
llm = LLM(sys.argv[1], max_model_len=512)
def run(n):
    params = SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    start = time.perf_counter()
    llm.generate([{"prompt_token_ids": list(range(1000, 1016))}], params, use_tqdm=False)
    return time.perf_counter() - start
run(4)
print(128 / (run(129) - run(1)))
"""
    done = subprocess.run([sys.executable, "-c", code, str(file)], check=True, capture_output=True)
    return float(done.stdout.decode().strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp", required=True, type=Path)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache/llmkit/kquant-files")
    parser.add_argument("--models", default="smollm2,llama1b")
    parser.add_argument("--types", default="Q4_K_M,Q5_K_M,Q6_K,Q8_0")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from llmkit.model.demo import default_cache_dir
    from llmkit.model.gguf.cache import cache_key

    print(
        "| file | MiB | llmkit load s (first, second) | llmkit 1 stream tok/s | "
        "llama-bench tg128 | ratio | llama-bench pp512 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model in args.models.split(","):
        f16 = f16_file(model, args.llama_cpp, args.out)
        for qtype in args.types.split(","):
            file = quantized(f16, qtype, args.llama_cpp, args.threads)
            shutil.rmtree(default_cache_dir() / "gguf" / cache_key(file.resolve()), True)
            loads = [llmkit_load(file), llmkit_load(file)]
            ours, peer = 0.0, {"tg128": 0.0, "pp512": 0.0}
            for _ in range(args.repeat):  # alternating, each side its best
                ours = max(ours, llmkit_decode(file))
                bench = llama_bench(file, args.llama_cpp, args.threads)
                peer = {k: max(peer[k], bench[k]) for k in peer}
            print(
                f"| {file.name} | {file.stat().st_size / 2**20:.0f} | {loads[0]:.1f}, "
                f"{loads[1]:.1f} | {ours:.1f} | {peer['tg128']:.1f} | "
                f"{ours / peer['tg128']:.2f}x | {peer['pp512']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
