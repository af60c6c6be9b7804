"""Where compute binds on CPU: prompt processing and 16 streams, llmkit against llama.cpp on the
same GGUF file, with this CPU's int8 dot-product peak beside them (issue 55).

    python benchmarks/compute_bound.py --llama-cpp LLAMA_CPP_SRC --model FILE [FILE ...] \
        [--prompt 512] [--streams 16] [--decode 128] [--threads 2] [--repeat 3]

Per file, alternating the two sides, each its best of ``--repeat``, each run a fresh process:
- prompt tok/s: llmkit's time for one ``--prompt``-token prompt (one token generated, the
  prefix cache off) against ``llama-bench -p PROMPT -n 0``;
- streams: the tokens generated a second for ``--streams`` requests of 16 prompt tokens and
  ``--decode`` tokens each, submitted at once, their prompts' time included on both sides:
  llmkit's ``generate`` of the lot against ``llama-batched-bench -npp 16 -ntg DECODE -npl
  STREAMS`` (STREAMS x DECODE over its total time T, prompts and generation).
The prompt's share of the int8 peak counts each weight's multiply-add once a prompt token (the
file's layers' matrices; the embedding and the head, which only the last token meets, left
out) over the peak that a micro-benchmark compiled here measures at ``--threads``: u8 x s8
products into int32 lanes with the widest instructions this CPU has, as the kernels use them
(``maddubs`` and an int16 add with AVX2 alone, ``dpbusd`` with VNNI).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PEAK_C = r"""
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
/* u8 x s8 multiply-adds a second over n_threads, 12 independent chains a thread. */
double int8_peak(int64_t rounds, int n_threads) {
    double start = omp_get_wtime();
    int64_t sink = 0;
#pragma omp parallel num_threads(n_threads) reduction(+ : sink)
    {
        __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8((char)(omp_get_thread_num() + 1));
        __m256i a[12];
        for (int i = 0; i < 12; i++) a[i] = _mm256_setzero_si256();
        for (int64_t r = 0; r < rounds; r++) {
            __asm__ volatile("" : "+x"(u), "+x"(s)); /* no product folded out of the loop */
            for (int i = 0; i < 12; i++) {
#if defined(__AVXVNNI__) || defined(__AVX512VNNI__)
                a[i] = _mm256_dpbusd_avx_epi32(a[i], u, s);
#else
                a[i] = _mm256_add_epi16(a[i], _mm256_maddubs_epi16(u, s));
#endif
            }
            __asm__ volatile("" : "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]));
        }
        for (int i = 0; i < 12; i++) sink += _mm256_extract_epi32(a[i], 0);
    }
    double seconds = omp_get_wtime() - start;
    return sink == 42 ? 0.0 : (double)rounds * 12 * 32 * n_threads / seconds;
}
"""

LLMKIT = """
import json, sys, time
from llmkit import LLM, SamplingParams
file, prompt, streams, decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = LLM(file, max_model_len=max(prompt, 16 + decode) + 16, max_num_seqs=streams,
          enable_prefix_caching=False)
def timed(batch):
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for _, n in batch]
    start = time.perf_counter()
    llm.generate([{"prompt_token_ids": p} for p, _ in batch], params, use_tqdm=False)
    return time.perf_counter() - start
ids = [100 + (i * 7919) % 20000 for i in range(prompt)]
timed([[ids[:64], 2]])  # warm up
out = {"prompt": prompt / min(timed([[ids, 1]]) for _ in range(2))}
batch = [[[100 + (7 * s + i * 31) % 20000 for i in range(16)], decode] for s in range(streams)]
out["streams"] = streams * decode / timed(batch)
print(json.dumps(out))
"""


def int8_peak(threads: int) -> float:
    """Multiply-adds a second at ``threads``, best of 5 (see the module's docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        source, library = Path(tmp) / "peak.c", Path(tmp) / "peak.so"
        source.write_text(PEAK_C)
        cc = os.environ.get("CC", "cc")
        flags = ["-O2", "-march=native", "-fopenmp", "-shared", "-fPIC"]
        subprocess.run([cc, *flags, str(source), "-o", str(library)], check=True)
        peak = ctypes.CDLL(str(library)).int8_peak
        peak.restype, peak.argtypes = ctypes.c_double, [ctypes.c_int64, ctypes.c_int]
        return max(peak(20_000_000, threads) for _ in range(5))


def linear_parameters(file: Path) -> int:
    """The multiply-adds of one prompt token through the file's layers: their matrices but the
    token embedding and the output head (which only a prompt's last token meets); of a mixture
    of experts' expert tensors, the share a token routes to."""
    from gguf import GGUFReader

    reader = GGUFReader(str(file))

    def field(name: str) -> int | None:
        found = reader.fields.get(name)
        return None if found is None else int(found.contents())

    arch = reader.fields["general.architecture"].contents()
    experts, used = field(f"{arch}.expert_count"), field(f"{arch}.expert_used_count")
    total = 0.0
    for t in reader.tensors:
        if len(t.shape) < 2 or t.name in ("token_embd.weight", "output.weight"):
            continue
        share = used / experts if experts and used and "_exps." in t.name else 1.0
        total += int(t.n_elements) * share
    return int(total)


def llmkit(file: Path, prompt: int, streams: int, decode: int) -> dict[str, float]:
    argv = [sys.executable, "-c", LLMKIT, str(file), str(prompt), str(streams), str(decode)]
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def llama_cpp(file: Path, src: Path, threads: int, prompt: int, streams: int, decode: int):
    bench = [str(src / "build/bin/llama-bench"), "-m", str(file), "-t", str(threads)]
    rows = subprocess.run(
        [*bench, "-p", str(prompt), "-n", "0", "-r", "1", "-o", "json"],
        check=True,
        capture_output=True,
    ).stdout
    pp = json.loads(rows)[0]["avg_ts"]
    batched = [str(src / "build/bin/llama-batched-bench"), "-m", str(file), "-t", str(threads)]
    context = streams * (16 + decode) + 64
    text = subprocess.run(
        [*batched, "-c", str(context), "-npp", "16", "-ntg", str(decode), "-npl", str(streams)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
    row = next(line for line in text.splitlines() if re.match(r"\|\s+16\s+\|", line))
    cells = row.strip("|").split("|")
    return {"prompt": pp, "streams": streams * decode / float(cells[8])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-cpp", required=True, type=Path)
    parser.add_argument("--model", nargs="+", required=True, type=Path)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--decode", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    peak = int8_peak(args.threads)
    print(f"int8 multiply-add peak at {args.threads} threads: {peak / 1e9:.0f} G/s")
    print(
        f"| file | llmkit prompt tok/s | share of int8 peak | llama-bench pp{args.prompt} | "
        f"ratio | llmkit {args.streams} streams tok/s | llama-batched-bench | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for file in args.model:
        ours = {"prompt": 0.0, "streams": 0.0}
        peer = dict(ours)
        for _ in range(args.repeat):  # alternating, each side its best
            run = llmkit(file, args.prompt, args.streams, args.decode)
            ours = {k: max(ours[k], run[k]) for k in ours}
            run = llama_cpp(
                file, args.llama_cpp, args.threads, args.prompt, args.streams, args.decode
            )
            peer = {k: max(peer[k], run[k]) for k in peer}
        share = ours["prompt"] * linear_parameters(file) / peak
        print(
            f"| {file.name} | {ours['prompt']:.0f} | {share:.0%} | {peer['prompt']:.0f} | "
            f"{ours['prompt'] / peer['prompt']:.2f}x | {ours['streams']:.1f} | "
            f"{peer['streams']:.1f} | {ours['streams'] / peer['streams']:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
