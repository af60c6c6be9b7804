"""llmkit against llama.cpp on the same weights and workload (issue 18).

    python benchmarks/peers.py --peer-python PEER_VENV/bin/python \
        --converter LLAMA_CPP_SRC/convert_hf_to_gguf.py [--shapes small,150m,long] \
        [--pairs fp32,int8,w8a8,int4,w4a8] [--threads 2]

Pairs: llmkit float32 vs llama.cpp f32, llmkit int8 (weight-only) and w8a8 vs q8_0 (whose
matmuls quantize activations to 8 bits too), llmkit int4 (weight-only) and w4a8 vs q4_0
(whose matmuls quantize activations to q8_0 too). The GGUFs
are made from each random-weight model by llama.cpp's converter (f32) and quantizer; the
llama.cpp side runs in ``--peer-python`` (an interpreter with llama-cpp-python, built from
source with native CPU flags, see RESULTS.md) through benchmarks/llama_cpp_side.py, every
sequence in one continuously batched context. Both sides get the same token-id prompts and
decode greedily to a fixed length (no EOS). Before timing, llama.cpp's f32 greedy tokens are
checked against HF transformers' on a few of the prompts. Prints output tokens/s of both,
the ratio llmkit / llama.cpp, and each side's share of tokens equal to llmkit float32's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from llmkit import LLM, SamplingParams
from llmkit.bench.workload import Jobs, token_jobs
from llmkit.model.demo import DEMO_SPEC, ModelSpec, build_model, default_cache_dir

SIDE = Path(__file__).with_name("llama_cpp_side.py")
SPEC_150M = ModelSpec(
    hidden_size=1024,
    num_layers=12,
    num_heads=16,
    num_kv_heads=4,
    intermediate_size=2816,
    max_position_embeddings=4096,
)
# name: (model, requests, prompt lengths, output lengths)
SHAPES: dict[str, tuple[ModelSpec, int, tuple[int, int], tuple[int, int]]] = {
    "small": (DEMO_SPEC, 64, (16, 256), (16, 256)),
    "150m": (SPEC_150M, 32, (16, 256), (16, 128)),
    "long": (DEMO_SPEC, 32, (768, 1536), (64, 256)),
}
NEAR_TIE = 1e-3
PAIRS = {
    "fp32": (None, "f32"),
    "int8": ("int8", "q8_0"),
    "w8a8": ("w8a8", "q8_0"),
    "int4": ("int4", "q4_0"),
    "w4a8": ("w4a8", "q4_0"),
}


def shape_model(shape: str) -> Path:
    """The shape's random-weight model folder, built once."""
    spec = SHAPES[shape][0]
    return build_model(default_cache_dir() / f"peers-{spec.hidden_size}-{spec.num_layers}", spec)


def workload(shape: str, vocab: int, seed: int = 0) -> Jobs:
    _, n, prompt_len, output_len = SHAPES[shape]
    return token_jobs(n, vocab, prompt_len, output_len, seed)


def run_llmkit(model: str, jobs: Jobs, quantization: str | None) -> tuple[float, list[list[int]]]:
    llm = LLM(model, quantization=quantization)
    prompts = [{"prompt_token_ids": p} for p, _ in jobs]
    params = [SamplingParams(temperature=0, max_tokens=o, ignore_eos=True) for _, o in jobs]
    llm.generate(prompts[:2], params[:2], use_tqdm=False)  # warm up
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - t0, [list(o.outputs[0].token_ids) for o in outs]


def run_llama_cpp(
    peer: str, gguf: Path, jobs: Jobs, threads: int, mode: str
) -> tuple[float, list[list[int]]]:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(jobs, f)
        f.flush()
        done = subprocess.run(
            [peer, str(SIDE), "run", str(gguf), f.name, str(threads), mode],
            capture_output=True,
            text=True,
            check=True,
        )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["seconds"], result["tokens"]


def hf_greedy(model: str, jobs: Jobs) -> list[tuple[list[int], list[float]]]:
    """HF's greedy tokens for each job, with the gap between its top two logits at each."""
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None
    out = []
    with torch.inference_mode():
        for prompt, n in jobs:
            gen = hf.generate(
                torch.tensor([prompt]),
                do_sample=False,
                max_new_tokens=n,
                min_new_tokens=n,
                output_scores=True,
                return_dict_in_generate=True,
            )
            top2 = torch.cat(gen.scores).topk(2, dim=-1).values
            out.append(
                (gen.sequences[0, len(prompt) :].tolist(), (top2[:, 0] - top2[:, 1]).tolist())
            )
    return out


def check_greedy(tokens: list[list[int]], hf: list[tuple[list[int], list[float]]]) -> str:
    """Equal to HF's tokens, or equal up to a position where HF's top two logits are within
    NEAR_TIE (float32 sums in another order may pick either there); else SystemExit."""
    equal = ties = 0
    for ours, (theirs, gaps) in zip(tokens, hf, strict=True):
        diverge = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
        if diverge is None:
            equal += len(ours)
        elif gaps[diverge] < NEAR_TIE:
            equal, ties = equal + diverge, ties + 1
        else:
            raise SystemExit(
                f"llama.cpp f32's greedy tokens differ from HF's at position {diverge}, "
                f"where HF's top two logits are {gaps[diverge]:.4f} apart"
            )
    return f"{equal} tokens equal to HF's, {ties} sequence(s) parting at a near tie"


def agreement(a: list[list[int]], b: list[list[int]]) -> float:
    pairs = [(x, y) for s, t in zip(a, b) for x, y in zip(s, t)]
    return sum(x == y for x, y in pairs) / len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", required=True, help="an interpreter with llama_cpp")
    parser.add_argument("--converter", required=True, help="llama.cpp's convert_hf_to_gguf.py")
    parser.add_argument("--shapes", default="small,150m,long")
    parser.add_argument("--pairs", default="fp32,int8,w8a8,int4,w4a8")
    parser.add_argument(
        "--peer-mode",
        choices=("default", "exact"),
        default="default",
        help="llama.cpp's timed runs: llama-server's defaults (flash attention, f16 KV cache) "
        "or f32 throughout (see llama_cpp_side.py); its greedy check always runs exact",
    )
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}; llmkit torch {torch.__version__}")
    rows = []
    for shape in args.shapes.split(","):
        model = shape_model(shape)
        ggufs = model / "gguf"
        subprocess.run(
            [args.peer_python, str(SIDE), "convert", str(model), args.converter, str(ggufs)],
            check=True,
            capture_output=True,
        )
        vocab = json.loads((model / "config.json").read_text())["vocab_size"]
        jobs = workload(shape, vocab)
        check = [(p, min(n, 32)) for p, n in jobs[:4]]
        _, peer_tokens = run_llama_cpp(
            args.peer_python, ggufs / "f32.gguf", check, args.threads, "exact"
        )
        checked = check_greedy(peer_tokens, hf_greedy(str(model), check))
        print(f"{shape}: llama.cpp f32's greedy tokens against HF's: {checked}")
        useful = sum(n for _, n in jobs)
        reference: list[list[int]] | None = None
        for pair in args.pairs.split(","):
            quant, gguf_type = PAIRS[pair]
            ours_s, ours = run_llmkit(str(model), jobs, quant)
            peer_s, peer = run_llama_cpp(
                args.peer_python, ggufs / f"{gguf_type}.gguf", jobs, args.threads, args.peer_mode
            )
            if pair == "fp32":
                reference = ours
            row = (
                f"{shape:<6} {pair:<5} llmkit {useful / ours_s:7.1f} tok/s  "
                f"llama.cpp {gguf_type:<4} {useful / peer_s:7.1f} tok/s  "
                f"ratio {peer_s / ours_s:5.2f}x"
            )
            if reference is not None:
                row += (
                    f"  same tokens as llmkit fp32: {agreement(reference, ours):.2f} / "
                    f"{agreement(reference, peer):.2f}"
                )
            print(row, flush=True)
            rows.append(row)
    print("\n".join(["", *rows]))


if __name__ == "__main__":
    sys.exit(main())
