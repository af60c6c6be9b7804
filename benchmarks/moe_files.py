"""Mixture-of-experts GGUF files made by llama.cpp's own tools: llama.cpp's llama-bench and
llama-batched-bench on each against llmkit's load, memory and decode.

    python benchmarks/moe_files.py --llama-cpp LLAMA_CPP_SRC [--out DIR] \
        [--models qwen3moe,gptoss] [--threads 2] [--repeat 3]

``LLAMA_CPP_SRC`` is llama.cpp's source (the llama-cpp-python sdist's ``vendor/llama.cpp``)
with ``llama-quantize``, ``llama-bench`` and ``llama-batched-bench`` built in ``build/bin``.
The files (benchmarks/moe_models.py), in ``--out``:

- ``qwen3moe-hf/``, ``qwen3moe-F16.gguf``, ``qwen3moe-Q4_K_M.gguf``: a random-weight
  Qwen3-MoE (12 layers, hidden 1024, 64 experts of 384, 8 active, 16 heads of 128, 4 KV
  heads, vocabulary 32000): 1.035B parameters, 0.243B active per token (the embedding
  counted). Q4_K_M as llama-quantize makes it: Q4_K, with Q6_K for the output, ``attn_v``
  and half the ``ffn_down_exps``.
- ``gptoss-hf/``, ``gptoss-F16.gguf``, ``gptoss-MXFP4_MOE.gguf``: a random-weight gpt-oss
  (12 layers, hidden 1024, 32 experts of 768 with biases, 4 active, 16 heads of 64, 4 KV
  heads, sinks, 128-token windows on every other layer, YaRN rope): 1.004B, 0.211B active.
  MXFP4_MOE: the experts MXFP4, every other matrix Q8_0.

Each HF folder (bfloat16, the demo tokenizer) is converted to F16 by
``PYTHONPATH=SRC/gguf-py python SRC/convert_hf_to_gguf.py FOLDER --outtype f16 --outfile F16``
(its tokenizer taken for GPT-2's, as in kquant_files.py; the bfloat16 gpt-oss folder takes
the converter's unquantized path) and quantized by ``SRC/build/bin/llama-quantize F16 OUT
TYPE THREADS``. Per file, the sides alternating ``--repeat`` times, each keeping its best:

- llama.cpp: ``llama-bench -m FILE -t THREADS -p 512 -n 64 -r 1`` (pp512, tg64) and
  ``llama-batched-bench -m FILE -t THREADS -c 2048 -npp 16 -ntg 64 -npl 16`` (16 streams,
  each 64 tokens after 16: all generated tokens over the whole run), its peak RSS by
  ``/usr/bin/time``.
- llmkit, each in a fresh process: load (engine ready; the file's cache emptied before the
  first) and the RSS then, against the file's tensor bytes and the KV cache allocated; and
  ``gguf_peer.py``'s side on the same token ids: a 512-token prompt, 64 greedy tokens after 16
  in one stream and in 16, peak RSS.

Decode rates come with their share of the memory floor: the bytes a step reads (the non-expert
tensors, the embedding by the row, the experts its tokens pick, at random in proportion
``1 - (1 - k/E)^streams`` of them, and the KV) over the bandwidth that ``llmkit bench
roofline`` measures. A side that fails (llmkit on an architecture it does not read yet) gets
its error in the table and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from gguf_peer import best, jobs  # noqa: E402
from moe_models import QTYPE, contents, f16_file, quantized  # noqa: E402

PROMPT, DECODE, STREAMS = 512, 64, 16
CONTEXT = 16 + DECODE // 2  # the average context of a decode step


class SideFailed(Exception):
    pass


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"]
        raise SideFailed(lines[-1][:200])
    return done


def llama_bench(file: Path, src: Path, threads: int) -> dict[str, float]:
    tool = str(src / "build/bin/llama-bench")
    args = [tool, "-m", str(file), "-t", str(threads), "-p", str(PROMPT), "-n", str(DECODE)]
    rows = json.loads(_run([*args, "-r", "1", "-o", "json"]).stdout)
    return {("prompt_tok_s" if r["n_prompt"] else "single_tok_s"): r["avg_ts"] for r in rows}


def batched_bench(file: Path, options: argparse.Namespace) -> dict:
    tool = str(options.llama_cpp / "build/bin/llama-batched-bench")
    args = ["-m", str(file), "-t", str(options.threads), "-c", "2048", "-npp", "16"]
    args += ["-ntg", str(DECODE), "-npl", str(STREAMS), "--output-format", "jsonl"]
    done = _run(["/usr/bin/time", "-f", "maxrss %M", tool, *args])
    row = json.loads(next(s for s in done.stdout.splitlines() if s.startswith("{")))
    rss = next(s for s in done.stderr.splitlines() if s.startswith("maxrss "))
    return {
        "streams_tok_s": {str(STREAMS): row["pl"] * row["tg"] / row["t"]},
        "peak_rss_mib": int(rss.split()[1]) / 1024,
    }


# A fresh process: seconds to the engine ready (gguf_peer's sizes), its RSS and KV cache then.
_LOADED = """
import sys, time
t = time.perf_counter()
from llmkit import LLM
llm = LLM(sys.argv[1], max_model_len=int(sys.argv[2]), max_num_seqs=int(sys.argv[3]))
load = time.perf_counter() - t
rss = next(s for s in open("/proc/self/status") if s.startswith("VmRSS:")).split()[1]
# Layers of different KV cache groups share tensors (model/kv_layout.py): count each once.
kv = sum({t.data_ptr(): t.nbytes for pair in llm._core.runner.kv_caches for t in pair}.values())
print(load, int(rss) / 1024, kv / 2**20)
"""


def llmkit_loaded(file: Path, per_seq: int) -> dict[str, float]:
    command = [sys.executable, "-c", _LOADED, str(file), str(per_seq), str(STREAMS)]
    load, rss, kv = map(float, _run(command).stdout.strip().splitlines()[-1].split())
    return {"load_s": load, "rss_mib": rss, "kv_mib": kv}


def llmkit_side(file: Path, spec_file: Path) -> dict:
    command = [sys.executable, str(HERE / "gguf_peer.py"), "--model", str(file)]
    command += ["--variant", "native", "--side", str(spec_file)]
    return json.loads(_run(command).stdout.strip().splitlines()[-1])


def bandwidth(threads: int) -> float:
    code = (
        "import torch; torch.set_num_threads(int(__import__('sys').argv[1])); "
        "from llmkit.bench.roofline import memory_bandwidth; print(memory_bandwidth())"
    )
    return float(_run([sys.executable, "-c", code, str(threads)]).stdout.split()[-1])


def measure(file: Path, args: argparse.Namespace, spec_file: Path) -> dict[str, dict]:
    """Both sides on ``file``, alternating, each its best; a failing side keeps its error."""
    from llmkit.model.demo import default_cache_dir
    from llmkit.model.gguf.cache import cache_key

    per_seq = json.loads(spec_file.read_text())["per_seq"]

    def peer() -> dict:
        return {**llama_bench(file, args.llama_cpp, args.threads), **batched_bench(file, args)}

    sides = {"llmkit": lambda: llmkit_side(file, spec_file), "llama.cpp": peer}
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    errors: dict[str, str] = {}
    try:
        shutil.rmtree(default_cache_dir() / "gguf" / cache_key(file.resolve()), True)
        loads = [llmkit_loaded(file, per_seq), llmkit_loaded(file, per_seq)]
    except SideFailed as e:
        errors["llmkit"] = str(e)
    for _ in range(args.repeat):
        for name, side in sides.items():
            if name not in errors:
                try:
                    runs[name].append(side())
                except SideFailed as e:
                    errors[name] = str(e)
    out = {name: {"error": errors[name]} if name in errors else best(runs[name]) for name in sides}
    if "error" not in out["llmkit"]:
        out["llmkit"]["loads"] = [x["load_s"] for x in loads]
        out["llmkit"]["after_load"] = loads[1]
    return out


def describe(file: Path) -> str:
    c = contents(file)
    mib = 2**20
    return (
        f"{file.name}: {c.params / 1e9:.3f}B parameters, {c.active_params / 1e9:.3f}B active "
        f"({c.used} of {c.experts} experts); tensors {c.bytes / mib:.0f} MiB, of which experts "
        f"{c.expert_bytes / mib:.0f} MiB; read per token {c.active_bytes / mib:.1f} MiB "
        f"(non-expert {c.dense_bytes / mib:.1f} with the embedding by the row, active experts "
        f"{c.expert_bytes * c.used / c.experts / mib:.1f}); KV {c.kv_per_token / 1024:.0f} KiB "
        "per context token"
    )


def rows(file: Path, sides: dict[str, dict], bw: float) -> list[str]:
    c = contents(file)
    floor = {n: n * bw / c.step_bytes(n, CONTEXT) for n in (1, STREAMS)}
    out = []
    for name, r in sides.items():
        if "error" in r:
            out.append(f"| {file.stem} | {name} | error: {r['error']} |" + " |" * 5)
            continue
        loads = r.get("loads")
        load = f"{loads[0]:.1f}, {loads[1]:.1f}" if loads else ""
        after = r.get("after_load")
        held = (c.bytes / 2**20 + after["kv_mib"]) if after else 0
        rss = f"{after['rss_mib']:.0f} ({held:.0f})" if after else ""
        one, many = r["single_tok_s"], r["streams_tok_s"][str(STREAMS)]
        out.append(
            f"| {file.stem} | {name} | {load} | {rss} | {r['prompt_tok_s']:.0f} | "
            f"{one:.1f} ({one / floor[1]:.0%}) | {many:.1f} ({many / floor[STREAMS]:.0%}) | "
            f"{r['peak_rss_mib']:.0f} |"
        )
    ours, peer = sides["llmkit"], sides["llama.cpp"]
    if "error" not in ours and "error" not in peer:
        ratio = [ours[k] / peer[k] for k in ("prompt_tok_s", "single_tok_s")]
        ratio.append(ours["streams_tok_s"][str(STREAMS)] / peer["streams_tok_s"][str(STREAMS)])
        out.append(
            f"| {file.stem} | ratio | | | {ratio[0]:.2f}x | **{ratio[1]:.2f}x** | "
            f"**{ratio[2]:.2f}x** | |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp", required=True, type=Path)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache/llmkit/moe-files")
    parser.add_argument("--models", default="qwen3moe,gptoss")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    files = []
    for model in args.models.split(","):
        f16 = f16_file(model, args.llama_cpp, args.out)
        files.append(quantized(f16, QTYPE[model], args.llama_cpp, args.threads))
        print(describe(files[-1]), flush=True)
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "jobs.json"
        spec_file.write_text(json.dumps(jobs(PROMPT, DECODE, [STREAMS])))
        for file in files:
            began = time.strftime("%H:%M")
            sides = measure(file, args, spec_file)
            bw = bandwidth(args.threads)
            print(f"{file.name}: {began}-{time.strftime('%H:%M')}, {bw / 1e9:.1f} GB/s", flush=True)
            table += rows(file, sides, bw)
    print(
        f"\n{args.threads} threads; best of {args.repeat} alternating runs; decode rates with "
        "their share of the memory floor (active experts' bytes)\n"
    )
    print(
        "| file | side | load s (first, second) | RSS after load MiB (tensors + KV) | "
        f"prompt tok/s ({PROMPT}) | 1 stream tok/s | {STREAMS} streams tok/s | peak RSS MiB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(table))


if __name__ == "__main__":
    main()
