"""Single-stream decode of a Qwen3-MoE-shaped GGUF file: the fused CPU decode step (every
layer in one C call, only the routed experts' tiles read) against the same layers run as
modules, and its share of the memory floor counting only the bytes a token reads.

    python benchmarks/fused_moe.py [--out DIR] [--types Q4_0,Q8_0] [--layers 12] \\
        [--hidden 1024] [--experts 64] [--top-k 8] [--inter 256] [--threads 2] [--repeat 3] \\
        [--tokens 128]

The model is random-weight (transformers' Qwen3MoeForCausalLM from a config, the tiny test
model's tokenizer), written as GGUF by the tests' writer (``write_gguf``: experts stacked
per layer as llama.cpp's converter does; the router and norms float32, every other matrix
``--types``). Decode rate: ``--tokens`` greedy tokens after a 16-token prompt, the prompt's
time taken off (a 1-token run's), best of ``--repeat``, the two paths alternating on one
engine.
The floor: the bytes a decode step reads (attention, norms, router, the LM head, ``top_k``
of each layer's experts, the KV) over the memory bandwidth, measured two ways: torch's sum
of a 1 GiB buffer (bytes read / s) and a 1 GiB copy (bytes read and written / s).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent
PROMPT = list(range(100, 116))


def hf_folder(out: Path, args: argparse.Namespace) -> Path:
    """The random-weight HF model of the asked shape (built once per shape)."""
    from llmkit.model.demo import ModelSpec, build_model, build_once

    tiny = build_model(out / "tiny-qwen3-moe", ModelSpec(architecture="qwen3_moe", head_dim=16))
    shape = {
        "hidden_size": args.hidden,
        "num_hidden_layers": args.layers,
        "num_experts": args.experts,
        "num_experts_per_tok": args.top_k,
        "moe_intermediate_size": args.inter,
        "intermediate_size": 4 * args.inter,
        "num_attention_heads": args.hidden // 64,
        "num_key_value_heads": max(1, args.hidden // 256),
        "head_dim": 64,
        "mlp_only_layers": [],
        "initializer_range": 0.02,
    }

    def write(tmp: Path) -> None:
        import transformers

        cfg = transformers.AutoConfig.from_pretrained(tiny)
        cfg.update(shape)
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        model.save_pretrained(tmp, max_shard_size="1000GB")
        for f in tiny.iterdir():
            if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
                shutil.copy(f, tmp / f.name)

    name = f"qwen3moe-{args.layers}x{args.hidden}-{args.experts}e{args.top_k}-{args.inter}"
    return build_once(out / name, shape, write)


def gguf_file(folder: Path, qtype: str) -> Path:
    sys.path.insert(0, str(HERE.parent))
    from tests.model.test_gguf_archs import write_gguf

    target = folder.with_name(f"{folder.name}-{qtype}.gguf")
    if not target.exists():
        float32 = ("ffn_gate_inp", "norm")  # as llama-quantize leaves them
        tmp = target.with_suffix(".tmp")
        write_gguf(str(folder), tmp, lambda n: "F32" if any(f in n for f in float32) else qtype)
        tmp.rename(target)
    return target


def bandwidths() -> tuple[float, float]:
    """(bytes read / s summing 1 GiB, bytes read and written / s copying 1 GiB), best of 5."""
    from llmkit.bench.roofline import memory_bandwidth

    src = torch.ones(2**28)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return memory_bandwidth(1024), 2 * src.numel() * 4 / best


def step_bytes(model: torch.nn.Module, kv_caches: list, context: int) -> tuple[int, int]:
    """(bytes a decode step of one stream reads, of which the experts'): every weight but the
    experts no row chose (``top_k`` of each layer's are read) and the embedding's rows."""
    from llmkit.bench.roofline import decode_reads
    from llmkit.model.layers.moe import NativeExperts, SparseMoE

    weights, kv = decode_reads(model, kv_caches)
    unread = experts = 0
    for module in model.modules():
        if isinstance(module, SparseMoE) and isinstance(module.experts, NativeExperts):
            held = sum(b.numel() * b.element_size() for b in module.experts.buffers())
            read = held * module.routing.top_k // module.experts.num_experts
            unread += held - read
            experts += read
    return weights - unread + kv * context, experts


def decode_rate(llm, fused: bool, tokens: int) -> float:
    """Decode tokens/s of one stream: ``tokens`` after the prompt, less a 1-token run."""
    from llmkit import SamplingParams

    llm._core.runner.model.model.fused_decode.enabled = fused

    def timed(n: int) -> float:
        params = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
        start = time.perf_counter()
        llm.generate([PROMPT], params, use_tqdm=False)
        return time.perf_counter() - start

    return tokens / (timed(tokens + 1) - timed(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "llmkit" / "bench")
    parser.add_argument("--types", default="Q4_0,Q8_0")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--experts", type=int, default=64)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--inter", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from llmkit import LLM

    folder = hf_folder(args.out, args)
    read_bw, copy_bw = bandwidths()
    print(
        f"{folder.name}; {args.threads} threads; bandwidth: sum {read_bw / 1e9:.1f} GB/s, "
        f"copy {copy_bw / 1e9:.1f} GB/s (read + written)"
    )
    print(
        "| experts | fused tok/s | modules tok/s | fused / modules | MiB a token "
        "(experts) | floor tok/s (sum, copy) | fused share (sum, copy) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for qtype in args.types.split(","):
        llm = LLM(str(gguf_file(folder, qtype)), max_model_len=512, max_num_seqs=1)
        runner = llm._core.runner
        rates: dict[bool, float] = {True: 0.0, False: 0.0}
        for _ in range(args.repeat):
            for fused in (True, False):
                rates[fused] = max(rates[fused], decode_rate(llm, fused, args.tokens))
        assert runner.model.model.fused_decode._plan is not None, "the kernel did not run"
        total, experts = step_bytes(runner.model, runner.kv_caches, len(PROMPT) + args.tokens // 2)
        floors = [bw / total for bw in (read_bw, copy_bw)]
        print(
            f"| {qtype} | {rates[True]:.1f} | {rates[False]:.1f} | "
            f"{rates[True] / rates[False]:.2f}x | {total / 2**20:.1f} ({experts / 2**20:.1f}) | "
            f"{floors[0]:.0f}, {floors[1]:.0f} | "
            f"{rates[True] / floors[0]:.0%}, {rates[True] / floors[1]:.0%} |"
        )
        llm.close()


if __name__ == "__main__":
    main()
