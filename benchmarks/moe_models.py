"""The mixture-of-experts files of benchmarks/moe_files.py: random-weight HF folders of two
shapes, converted and quantized by llama.cpp's own tools, and what each file holds."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
COMMON = {
    "vocab_size": 32000,  # the demo tokenizer's 2048, padded (as kquant_files' llama1b)
    "hidden_size": 1024,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "tie_word_embeddings": False,
    "initializer_range": 0.02,  # kquant_files' llama1b
}
# Qwen3-30B-A3B's proportions (64 of its 128 experts, 8 active, head_dim 128), ~1.03B total.
QWEN3MOE = {
    **COMMON,
    "head_dim": 128,
    "intermediate_size": 3072,  # no dense layer uses it: every layer is sparse
    "moe_intermediate_size": 384,
    "num_experts": 64,
    "num_experts_per_tok": 8,
    "norm_topk_prob": True,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "max_position_embeddings": 4096,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
}
# gpt-oss-20b's: 32 experts top-4 with biases, attention sinks, sliding (128) and full layers
# alternating, its YaRN rope; ~1.0B total.
GPTOSS = {
    **COMMON,
    "head_dim": 64,
    "intermediate_size": 768,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "sliding_window": 128,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 150000.0,
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
        "original_max_position_embeddings": 4096,
    },
}
# Qwen3.5-35B-A3B's proportions (Qwen3.6-35B-A3B's too): three Gated DeltaNet layers to one
# of gated full attention (8 heads of 256, 2 KV heads, a quarter of each head rotated);
# linear attention with 8 key heads and 16 value heads of 128; 64 of its 256 experts, 8
# active, beside a shared expert; ~1.07B total.
QWEN35MOE = {
    **COMMON,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "linear_num_key_heads": 8,
    "linear_num_value_heads": 16,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "moe_intermediate_size": 384,
    "shared_expert_intermediate_size": 384,
    "num_experts": 64,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 32768,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000000.0,
        "partial_rotary_factor": 0.25,
    },
}
MODELS = {
    "qwen3moe": ("Qwen3MoeConfig", QWEN3MOE),
    "gptoss": ("GptOssConfig", GPTOSS),
    "qwen35moe": ("Qwen3_5MoeTextConfig", QWEN35MOE),
}
QTYPE = {"qwen3moe": "Q4_K_M", "gptoss": "MXFP4_MOE", "qwen35moe": "Q4_K_M"}
# The converter's flags a family needs: a Qwen3.5 config without multi-token prediction.
CONVERT_FLAGS = {"qwen35moe": ["--no-mtp"]}


def hf_folder(model: str, out: Path) -> Path:
    """``model``'s random-weight HF folder (bfloat16, the demo tokenizer beside), built once."""
    from llmkit.model.demo import _tokenizer, build_once

    config_class, shape = MODELS[model]

    def write(tmp: Path) -> None:
        import torch
        import transformers

        tokenizer = _tokenizer()
        tokenizer.save_pretrained(tmp)
        ids = {f"{t}_token_id": getattr(tokenizer, f"{t}_token_id") for t in ("bos", "eos", "pad")}
        config = getattr(transformers, config_class)(**shape, **ids)
        torch.manual_seed(0)
        net = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        with torch.no_grad():  # HF zeroes biases; random ones, as the demo builder's
            for name, param in net.named_parameters():
                if name.endswith("bias"):
                    param.normal_(0.0, shape["initializer_range"])
        net.save_pretrained(tmp)

    return build_once(out / f"{model}-hf", {"config": config_class, **shape}, write)


# The converter, taking a tokenizer it does not know (the random model's, trained locally)
# for GPT-2's pre-tokenizer, as kquant_files.py does.
_CONVERT = """
import runpy, sys
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def f16_file(model: str, src: Path, out: Path) -> Path:
    """``model``'s F16 GGUF, converted once by llama.cpp's converter (a gpt-oss folder in
    bfloat16, not MXFP4 ``_blocks``/``_scales``, takes its unquantized path: the experts'
    ``gate_up_proj`` split and transposed, a warning per tensor)."""
    target = out / f"{model}-F16.gguf"
    if not target.exists():
        folder = hf_folder(model, out)
        env = {**os.environ, "PYTHONPATH": f"{src / 'gguf-py'}:{src}"}
        argv = [str(src / "convert_hf_to_gguf.py"), str(folder), "--outtype", "f16"]
        argv += CONVERT_FLAGS.get(model, [])
        tmp = target.with_suffix(".part")
        subprocess.run(
            [sys.executable, "-c", _CONVERT, *argv, "--outfile", str(tmp)], check=True, env=env
        )
        tmp.rename(target)
    return target


def quantized(f16: Path, qtype: str, src: Path, threads: int) -> Path:
    target = f16.with_name(f16.name.replace("F16", qtype))
    if not target.exists():
        tool = str(src / "build/bin/llama-quantize")
        tmp = target.with_suffix(".part")
        subprocess.run([tool, str(f16), str(tmp), qtype, str(threads)], check=True)
        tmp.rename(target)
    return target


@dataclass
class Contents:
    """What a file holds: parameters and tensor bytes, all and a token's share."""

    params: int
    expert_params: int
    bytes: int
    expert_bytes: int
    dense_bytes: int  # what a token reads besides experts: the embedding by the row
    experts: int
    used: int
    layers: int
    kv_per_token: int  # float16 K and V of one context token, all layers
    window: int  # a sliding layer's keys (0: none); gpt-oss slides every other layer

    @property
    def active_params(self) -> int:
        return round(self.params - self.expert_params * (1 - self.used / self.experts))

    @property
    def active_bytes(self) -> int:
        return round(self.dense_bytes + self.expert_bytes * self.used / self.experts)

    def step_bytes(self, streams: int, context: int) -> float:
        """Bytes a decode step of ``streams`` reads: the experts that any of its tokens
        picks (on average, if each picks ``used`` of ``experts`` uniformly), the other
        weights once, each stream's KV over ``context`` tokens."""
        picked = 1 - (1 - self.used / self.experts) ** streams
        kv = self.kv_per_token * context
        if self.window:
            kv -= self.kv_per_token / 2 * max(0, context - self.window)
        return self.dense_bytes + self.expert_bytes * picked + streams * kv


def contents(file: Path) -> Contents:
    from gguf import GGUFReader

    reader = GGUFReader(file)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def meta(key: str, default: int = 0) -> int:
        field = reader.fields.get(f"{arch}.{key}")
        return int(field.parts[-1][0]) if field else default

    layers, heads = meta("block_count"), meta("attention.head_count")
    head_k = meta("attention.key_length") or meta("embedding_length") // heads
    head_v = meta("attention.value_length") or head_k
    expert = [t for t in reader.tensors if "_exps." in t.name]
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    size = sum(int(t.n_bytes) for t in reader.tensors)
    expert_bytes = sum(int(t.n_bytes) for t in expert)
    return Contents(
        params=sum(int(t.n_elements) for t in reader.tensors),
        expert_params=sum(int(t.n_elements) for t in expert),
        bytes=size,
        expert_bytes=expert_bytes,
        # gguf-py lists a tensor's dimensions innermost first: shape[-1] is the rows
        dense_bytes=round(size - expert_bytes - embd.n_bytes * (1 - 1 / int(embd.shape[-1]))),
        experts=meta("expert_count"),
        used=meta("expert_used_count"),
        layers=layers,
        kv_per_token=layers * meta("attention.head_count_kv") * (head_k + head_v) * 2,
        window=meta("attention.sliding_window"),
    )
