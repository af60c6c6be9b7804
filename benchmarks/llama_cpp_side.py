"""The llama.cpp side of benchmarks/peers.py, run by an interpreter that has llama-cpp-python.

    PEER_PYTHON benchmarks/llama_cpp_side.py convert MODEL_DIR CONVERTER OUT_DIR
    PEER_PYTHON benchmarks/llama_cpp_side.py run GGUF JOBS_JSON THREADS [MODE]
    PEER_PYTHON benchmarks/llama_cpp_side.py perplexity GGUF TEXT_FILE THREADS
    PEER_PYTHON benchmarks/llama_cpp_side.py profile GGUF JOBS_JSON THREADS

``convert`` writes OUT_DIR/{f32,q8_0,q4_0}.gguf: f32 by llama.cpp's own converter
(convert_hf_to_gguf.py), q8_0 and q4_0 quantized from it as llama-quantize does. The test
models' locally trained byte-level BPE tokenizer is unknown to the converter's pre-tokenizer
table; the prompts are token ids, so it is registered as GPT-2's (the same byte-level split).

``run`` decodes the jobs (``[[prompt ids, max tokens], ...]``) greedily, as llama-server does:
every sequence in one context (``n_seq_max``), each ``llama_decode`` batch carrying one token
of every generating sequence plus prompt chunks of the others up to ``n_batch`` tokens.
MODE ``default`` keeps llama-server's attention defaults (flash attention where it can, f16
KV cache); ``exact`` computes in f32 throughout (no flash attention, f32 KV cache), as HF
does: its logits then match HF's to ~1e-4 where flash attention's differ by ~0.04.
Prints ``{"seconds": wall time, "tokens": [[generated ids], ...]}``.

``profile`` times what ``benchmarks/gguf_peer.py`` compares, in a fresh process: load
(model and context), a prompt alone, one stream decoding, then each batch of streams of the
jobs (``{"prompt": ids, "decode": n, "streams": {"16": [[ids, n], ...], ...}}``), and the
peak RSS.

``perplexity`` scores a text the way ``llmkit bench perplexity`` does (its tokens without a
BOS, each after all before it, in one window of the text's length) and prints
``{"tokens": scored, "perplexity": ...}``. Imports no llmkit.
"""

from __future__ import annotations

import ctypes
import json
import runpy
import sys
import time
from pathlib import Path

import llama_cpp as L

N_BATCH, N_UBATCH = 2048, 512  # llama-server's defaults


def convert(model_dir: str, converter: str, out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    f32 = out / "f32.gguf"
    if not f32.exists():
        sys.path.insert(0, str(Path(converter).parent))
        from conversion.base import TextModel

        TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
        argv = sys.argv
        sys.argv = [converter, model_dir, "--outtype", "f32", "--outfile", str(f32)]
        try:
            runpy.run_path(converter, run_name="__main__")
        finally:
            sys.argv = argv
    L.llama_backend_init()
    for name, ftype in (("q8_0", L.LLAMA_FTYPE_MOSTLY_Q8_0), ("q4_0", L.LLAMA_FTYPE_MOSTLY_Q4_0)):
        target = out / f"{name}.gguf"
        if target.exists():
            continue
        params = L.llama_model_quantize_default_params()
        params.ftype = ftype
        if L.llama_model_quantize(str(f32).encode(), str(target).encode(), ctypes.byref(params)):
            raise SystemExit(f"llama_model_quantize failed for {name}")


def _quiet() -> None:
    @L.llama_log_callback
    def drop(level, text, data):
        return None

    _quiet.callback = drop  # type: ignore[attr-defined]  (keep it alive)
    L.llama_log_set(drop, ctypes.c_void_p())


def run(gguf: str, jobs_path: str, threads: int, mode: str = "default") -> None:
    jobs = json.loads(Path(jobs_path).read_text())
    _quiet()
    L.llama_backend_init()
    model = L.llama_model_load_from_file(gguf.encode(), L.llama_model_default_params())
    per_seq = max(len(p) + n for p, n in jobs)
    cparams = L.llama_context_default_params()
    cparams.n_seq_max = len(jobs)
    cparams.n_ctx = len(jobs) * (-(-per_seq // 256) * 256)
    cparams.n_batch, cparams.n_ubatch = N_BATCH, N_UBATCH
    cparams.n_threads = cparams.n_threads_batch = threads
    if mode == "exact":
        cparams.type_k = cparams.type_v = L.GGML_TYPE_F32
        cparams.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = L.llama_init_from_model(model, cparams)
    sampler = L.llama_sampler_init_greedy()
    batch = L.llama_batch_init(N_BATCH, 0, 1)
    batch.n_tokens = 0
    mem = L.llama_get_memory(ctx)
    decode(ctx, sampler, batch, [[p, min(n, 4)] for p, n in jobs[:2]])  # warm up
    L.llama_memory_clear(mem, True)
    t0 = time.perf_counter()
    tokens = decode(ctx, sampler, batch, jobs)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "tokens": tokens}))


def peak_rss_mib() -> float:
    """This process's peak RSS since its exec (VmHWM: getrusage's ru_maxrss carries the
    spawning parent's peak across the exec, which made a small side look as big as its
    parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def profile(gguf: str, jobs_path: str, threads: int) -> None:

    spec = json.loads(Path(jobs_path).read_text())
    batches = spec["streams"]
    _quiet()
    t0 = time.perf_counter()
    L.llama_backend_init()
    model = L.llama_model_load_from_file(gguf.encode(), L.llama_model_default_params())
    cparams = L.llama_context_default_params()
    widest = max(len(jobs) for jobs in batches.values())
    cparams.n_seq_max = widest
    cparams.n_ctx = widest * spec["per_seq"]
    cparams.n_batch, cparams.n_ubatch = N_BATCH, N_UBATCH
    cparams.n_threads = cparams.n_threads_batch = threads
    ctx = L.llama_init_from_model(model, cparams)
    load = time.perf_counter() - t0
    sampler = L.llama_sampler_init_greedy()
    batch = L.llama_batch_init(N_BATCH, 0, 1)
    batch.n_tokens = 0
    mem = L.llama_get_memory(ctx)

    def timed(jobs: list[list]) -> float:
        L.llama_memory_clear(mem, True)
        start = time.perf_counter()
        decode(ctx, sampler, batch, jobs)
        return time.perf_counter() - start

    timed([[spec["prompt"][:16], 4]])  # warm up
    prompt = timed([[spec["prompt"], 1]])
    single = timed([[spec["prompt"][:16], spec["decode"] + 1]]) - timed([[spec["prompt"][:16], 1]])
    many = {n: sum(k for _, k in jobs) / timed(jobs) for n, jobs in batches.items()}
    print(
        json.dumps(
            {
                "load_s": load,
                "prompt_tok_s": len(spec["prompt"]) / prompt,
                "single_tok_s": spec["decode"] / single,
                "streams_tok_s": many,
                "peak_rss_mib": peak_rss_mib(),
            }
        )
    )


def decode(ctx, sampler, batch, jobs: list[list]) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in jobs]
    fed = [0] * len(jobs)  # prompt tokens in the cache
    live = set(range(len(jobs)))
    while live:
        rows: list[tuple[int, int]] = []  # (sequence, batch row) to sample from
        for s in sorted(live):
            prompt = jobs[s][0]
            if fed[s] == len(prompt):
                _put(batch, rows, s, out[s][-1], len(prompt) + len(out[s]) - 1, True)
        for s in sorted(live):
            prompt = jobs[s][0]
            take = min(len(prompt) - fed[s], N_BATCH - batch.n_tokens)
            for i in range(fed[s], fed[s] + take):
                _put(batch, rows, s, prompt[i], i, i == len(prompt) - 1)
            fed[s] += take
        if L.llama_decode(ctx, batch):
            raise SystemExit("llama_decode failed")
        batch.n_tokens = 0
        for s, row in rows:
            out[s].append(L.llama_sampler_sample(sampler, ctx, row))
            if len(out[s]) == jobs[s][1]:
                live.discard(s)
    return out


def _put(batch, rows: list, seq: int, token: int, pos: int, logits: bool) -> None:
    n = batch.n_tokens
    batch.token[n], batch.pos[n], batch.n_seq_id[n] = token, pos, 1
    batch.seq_id[n][0], batch.logits[n] = seq, logits
    if logits:
        rows.append((seq, n))
    batch.n_tokens = n + 1


def perplexity(gguf: str, text_path: str, threads: int) -> None:
    import math

    import numpy as np

    text = Path(text_path).read_text().encode()
    llm = L.Llama(model_path=gguf, n_ctx=4096, n_threads=threads, logits_all=True, verbose=False)
    tokens = llm.tokenize(text, add_bos=False, special=False)
    llm.eval(tokens)
    logits = np.asarray(llm.scores[: len(tokens) - 1], dtype=np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
    nll = log_norm - logits[np.arange(len(tokens) - 1), tokens[1:]]
    print(json.dumps({"tokens": len(nll), "perplexity": math.exp(nll.mean())}))


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "convert":
        convert(*rest)
    elif command == "perplexity":
        perplexity(rest[0], rest[1], int(rest[2]))
    elif command == "profile":
        profile(rest[0], rest[1], int(rest[2]))
    else:
        run(rest[0], rest[1], int(rest[2]), *rest[3:])
