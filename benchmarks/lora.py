"""LoRA throughput: the 64-request workload spread over 4 adapters vs the base model alone.

    python benchmarks/lora.py [--model demo] [--num-requests 64] [--rank 16] [--repeat 2]

Offline ``LLM.generate`` on the workload of benchmarks/throughput.py (prompts and outputs of
16..256 tokens, greedy, ``ignore_eos``). Three sides, each its own engine, run in turn and
best of ``--repeat`` kept: the base model without LoRA; the same engine with
``enable_lora`` (``max_loras=4``) but no request naming an adapter; and request i running
with adapter i % 4. The adapters are random rank-``--rank`` PEFT folders targeting all seven
projections (q, k, v, o, gate, up, down), written here. Prints output tokens/s of each and
the ratios to the base model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from throughput import workload
from transformers import AutoConfig

from llmkit import LLM, LoRARequest, SamplingParams
from llmkit.bench.workload import machine
from llmkit.model.names import resolve_model

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
NUM_ADAPTERS = 4


def write_adapter(path: Path, config, rank: int, seed: int) -> str:
    """A PEFT LoRA folder for ``config``'s model with random A and B."""
    c = config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    q, kv = c.num_attention_heads * head_dim, c.num_key_value_heads * head_dim
    shapes = {
        "self_attn.q_proj": (c.hidden_size, q),
        "self_attn.k_proj": (c.hidden_size, kv),
        "self_attn.v_proj": (c.hidden_size, kv),
        "self_attn.o_proj": (q, c.hidden_size),
        "mlp.gate_proj": (c.hidden_size, c.intermediate_size),
        "mlp.up_proj": (c.hidden_size, c.intermediate_size),
        "mlp.down_proj": (c.intermediate_size, c.hidden_size),
    }
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(c.num_hidden_layers):
        for module, (fan_in, fan_out) in shapes.items():
            key = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{key}.lora_A.weight"] = torch.randn(rank, fan_in, generator=gen) / fan_in**0.5
            tensors[f"{key}.lora_B.weight"] = torch.randn(fan_out, rank, generator=gen) * 0.01
    path.mkdir(parents=True)
    save_file(tensors, str(path / "adapter_model.safetensors"))
    adapter_config = {
        "peft_type": "LORA",
        "r": rank,
        "lora_alpha": 2 * rank,
        "target_modules": list(TARGETS),
        "bias": "none",
    }
    (path / "adapter_config.json").write_text(json.dumps(adapter_config))
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=2, help="runs per side, in turn; best kept")
    args = parser.parse_args()
    model = resolve_model(args.model)
    config = AutoConfig.from_pretrained(model)
    jobs = workload(args.num_requests, config.vocab_size)
    prompts = [{"prompt_token_ids": p} for p, _ in jobs]
    params = [SamplingParams(temperature=0, max_tokens=o, ignore_eos=True) for _, o in jobs]
    useful = sum(o for _, o in jobs)
    print(
        f"model {args.model}: {config.num_hidden_layers} layers, hidden {config.hidden_size}; "
        f"{len(jobs)} requests, {sum(len(p) for p, _ in jobs)} prompt and {useful} output "
        f"tokens; {NUM_ADAPTERS} adapters of rank {args.rank}; {machine()}, "
        f"torch threads {torch.get_num_threads()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        loras = [
            LoRARequest(
                f"lora{i}", i + 1, write_adapter(Path(tmp) / f"lora{i}", config, args.rank, i)
            )
            for i in range(NUM_ADAPTERS)
        ]
        lora_engine = dict(enable_lora=True, max_loras=NUM_ADAPTERS, max_lora_rank=args.rank)
        sides = {
            "base model": (LLM(model), None),
            "LoRA on, no adapter": (LLM(model, **lora_engine), None),
            f"{NUM_ADAPTERS} adapters": (
                LLM(model, **lora_engine),
                [loras[i % NUM_ADAPTERS] for i in range(len(jobs))],
            ),
        }
        best = {name: float("inf") for name in sides}
        for llm, lora in sides.values():  # warm up, and load the adapters
            warm = lora[:NUM_ADAPTERS] if lora else None
            llm.generate(prompts[:NUM_ADAPTERS], params[:NUM_ADAPTERS], False, lora_request=warm)
        for _ in range(args.repeat):
            for name, (llm, lora) in sides.items():
                start = time.perf_counter()
                outs = llm.generate(prompts, params, use_tqdm=False, lora_request=lora)
                best[name] = min(best[name], time.perf_counter() - start)
                assert sum(len(o.outputs[0].token_ids) for o in outs) == useful
    base = useful / best["base model"]
    for name, seconds in best.items():
        rate = useful / seconds
        print(f"{name:<22} {rate:8.1f} output tok/s  ({seconds:.2f} s)  {rate / base:.2f}x base")


if __name__ == "__main__":
    main()
