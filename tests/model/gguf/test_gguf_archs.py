"""Each architecture llmkit reads from GGUF loads to the same model as its HF folder: the tiny
test models written as GGUF the way llama.cpp's converter does (experts stacked per layer)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file
from tests.model.gguf.gguf_gemma import FAMILIES
from tests.model.gguf.gguf_qwen35 import QWEN35
from tests.model.layers.weights.kquant_blocks import quantize

from llmkit import LLM, SamplingParams
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.model import registry
from llmkit.model.gguf.tensors import unpermute
from llmkit.model.layers.moe import NativeExperts
from llmkit.model.layers.native import NativeLinear

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
PROMPTS = [[1, 5, 9, 200, 31], [1, 700, 12], list(range(1, 40))]
# HF module -> GGUF tensor name piece (llama.cpp's gguf.constants TENSOR_NAMES)
LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "mlp.router": "ffn_gate_inp",
}
STACKED = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.((?:gate_up|down)_proj(?:_bias)?)")
EXPERT = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight")
GLOBAL = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


def permute(weights: torch.Tensor, n_head: int, n_head_kv: int | None) -> torch.Tensor:
    """llama.cpp's convert_hf_to_gguf.py ``LlamaModel.permute``, verbatim."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_gguf(folder: str, out: Path, qtype: str | Callable[[str], str] = "F32") -> Path:
    """The HF model in ``folder`` as a GGUF file, as llama.cpp's converter writes it: float32,
    or its matrices quantized to ``qtype`` (as llama-quantize does; norms stay float32), or
    to ``qtype(name)`` for each GGUF tensor name (a mix, as Q4_K_M's)."""
    type_of = qtype if callable(qtype) else lambda name: qtype
    cfg = json.loads(Path(folder, "config.json").read_text())
    entry = registry.by_model_type(cfg["model_type"])
    assert entry is not None
    arch = entry.gguf or "llama"  # a Mistral is written as a Llama
    writer = gguf.GGUFWriter(str(out), arch)
    config = transformers.AutoConfig.from_pretrained(folder)  # its attribute names
    for field, key in entry.gguf_keys.items():
        writer.add_uint32(f"{arch}.{key}", getattr(config, field))
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    family = {**FAMILIES, **QWEN35}.get(arch)  # a family the converter writes its own way
    rope = cfg["rope_parameters"]
    if family is not None:
        family.metadata(writer, cfg)
    else:
        writer.add_rope_freq_base(rope["rope_theta"])
    if family is None and rope["rope_type"] == "yarn":
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rope["factor"])
        writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        writer.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        writer.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    _add_tokenizer(writer, folder)
    names = {**LAYER, **{hf: piece for piece, hf in entry.gguf_tensors.items()}}
    tensors = load_file(str(Path(folder, "model.safetensors")))
    tensors = _stack_experts(family.convert(tensors, cfg) if family else tensors)
    if family is not None:  # named by llama.cpp's own table, as the converter names them
        tensors = family.tensors(tensors, cfg)
    for name, tensor in tensors.items():
        if arch == "llama" and ".q_proj." in name:
            tensor = permute(tensor, heads, heads)
        elif arch == "llama" and ".k_proj." in name:
            tensor = permute(tensor, heads, kv_heads)
        gguf_name = name if family is not None else _gguf_name(name, names)
        weight = tensor.float().numpy()
        kind = gguf.GGMLQuantizationType[type_of(gguf_name)]
        # llama-quantize leaves the convolution of linear attention in float32.
        quantized = weight.ndim >= 2 and "ssm_conv1d" not in gguf_name
        if kind != gguf.GGMLQuantizationType.F32 and quantized:
            blocks = quantize(weight.reshape(-1, weight.shape[-1]), kind.name)
            blocks = blocks.reshape(*weight.shape[:-1], -1)
            writer.add_tensor(gguf_name, blocks, raw_dtype=kind)
        else:
            writer.add_tensor(gguf_name, weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _stack_experts(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each layer's experts' projections as one ``[E, rows, in]`` tensor (GGUF's ``ffn_*_exps``),
    as llama.cpp's converter merges them (gpt-oss's: transposed, gate and up de-interleaved)."""
    out, experts = {}, {}
    for name, tensor in tensors.items():
        m = EXPERT.fullmatch(name)
        stacked = STACKED.fullmatch(name)
        if stacked is not None:
            layer, kind = stacked[1], stacked[2]
            suffix = "bias" if kind.endswith("_bias") else "weight"
            rows = tensor if suffix == "bias" else tensor.transpose(1, 2)
            if kind.startswith("down"):
                out[f"blk.{layer}.ffn_down_exps.{suffix}"] = rows
            else:
                out[f"blk.{layer}.ffn_gate_exps.{suffix}"] = rows[:, 0::2]
                out[f"blk.{layer}.ffn_up_exps.{suffix}"] = rows[:, 1::2]
        elif m is None:
            out[name] = tensor
        else:
            experts.setdefault((int(m[1]), m[3]), {})[int(m[2])] = tensor
    for (layer, proj), by_expert in sorted(experts.items()):
        out[f"blk.{layer}.ffn_{proj}_exps.weight"] = torch.stack(
            [by_expert[e] for e in sorted(by_expert)]
        )
    return out


def _gguf_name(name: str, names: dict[str, str]) -> str:
    if name.startswith("blk."):
        return name
    if name.endswith(".sinks"):  # a parameter of its own, not a module's weight
        name += ".weight"
    module, _, kind = name.rpartition(".")
    if module in GLOBAL:
        return f"{GLOBAL[module]}.{kind}"
    _, _, layer, rest = module.split(".", 3)
    return f"blk.{layer}.{names[rest]}.{kind}"


def _add_tokenizer(writer: gguf.GGUFWriter, folder: str) -> None:
    spec = json.loads(Path(folder, "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    special = {t["content"]: t["id"] for t in spec["added_tokens"] if t["special"]}
    tokens = sorted({**vocab, **special}, key=lambda t: {**vocab, **special}[t])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(
        [gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens]
    )
    writer.add_token_merges([" ".join(pair) for pair in spec["model"]["merges"]])
    writer.add_bos_token_id(special["<s>"])
    writer.add_eos_token_id(special["</s>"])
    writer.add_unk_token_id(special["<unk>"])
    writer.add_pad_token_id(special["<pad>"])
    writer.add_add_bos_token(True)
    writer.add_chat_template(Path(folder, "chat_template.jinja").read_text())


@pytest.mark.parametrize("arch", registry.model_types("decoder"))  # every one, a new one too
def test_a_gguf_file_serves_what_its_hf_folder_does(arch, model_factory, tmp_path):
    folder = model_factory(arch)
    file = write_gguf(folder, tmp_path / f"{arch}.gguf")
    theirs, ours = LLM(folder), LLM(str(file))
    expected = theirs.generate(PROMPTS, GREEDY, use_tqdm=False)
    got = ours.generate(PROMPTS, GREEDY, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in expected]
    want, have = np.array(_prompt_logprobs(theirs)), np.array(_prompt_logprobs(ours))
    assert np.abs(have - want).max() < 2e-3


def _prompt_logprobs(llm: LLM) -> list[float]:
    params = SamplingParams(max_tokens=1, prompt_logprobs=0)
    out = llm.generate(PROMPTS, params, use_tqdm=False)
    return [
        entry[token].logprob
        for o in out
        for token, entry in zip(o.prompt_token_ids[1:], o.prompt_logprobs[1:], strict=True)
    ]


@pytest.mark.parametrize(
    ("arch", "qtype"),
    [
        ("qwen2", "Q8_0"),  # biases, a tied Q8_0 embedding and head
        ("mistral", "Q4_0"),  # an untied Q4_0 head
        ("llama", "Q4_1"),
    ],
)
def test_quantized_tensors_load_as_they_are(arch, qtype, model_factory, tmp_path):
    """By default a file's Q4_0/Q4_1/Q8_0 matrices load natively; the answers stay those of
    the file dequantized, up to the int8 activations' rounding."""
    file = write_gguf(model_factory(arch), tmp_path / f"{arch}.gguf", qtype)
    ours, widened = LLM(str(file)), LLM(str(file), dtype="float32")
    model = ours._core.runner.model
    native = [m for m in model.modules() if isinstance(m, NativeLinear)]
    assert len(native) >= 2 * 4  # qkv, o, gate_up and down of both layers
    assert all(part.format.name == qtype for m in native for part in m.parts)
    got, want = np.array(_prompt_logprobs(ours)), np.array(_prompt_logprobs(widened))
    assert np.abs(got - want).max() < 0.1  # nats; measured 0.03-0.04, a wrong scale is O(1)


@pytest.mark.parametrize(
    ("arch", "qtype", "sparse"),
    [
        ("qwen3_moe", "Q8_0", 1),
        ("qwen3_moe", "Q4_0", 1),
        ("gpt_oss", "MXFP4", 2),
    ],
)
def test_experts_load_as_they_are(arch, qtype, sparse, model_factory, tmp_path):
    """A mixture of experts' stacked expert tensors load natively, each expert a view of its
    rows (gpt-oss's with their biases, in MXFP4 as its published files have them, the rest
    Q8_0 as llama-quantize's MXFP4_MOE leaves it); the answers stay those of the file
    dequantized, up to the activations' rounding."""
    mix = {"MXFP4": lambda name: "MXFP4" if "_exps." in name else "Q8_0"}
    file = write_gguf(model_factory(arch), tmp_path / "moe.gguf", mix.get(qtype, qtype))
    ours, widened = LLM(str(file)), LLM(str(file), dtype="float32")
    experts = [m for m in ours._core.runner.model.modules() if isinstance(m, NativeExperts)]
    assert len(experts) == sparse  # Qwen3-MoE's test model has a dense layer
    assert {p.format.name for p in (experts[0].gate.parts + experts[0].down.parts)} == {qtype}
    got, want = np.array(_prompt_logprobs(ours)), np.array(_prompt_logprobs(widened))
    assert np.abs(got - want).max() < 0.1


@pytest.mark.parametrize("arch", ["qwen3_5_text", "qwen3_5_moe_text"])
def test_a_hybrids_linear_attention_and_shared_expert_load_as_they_are(
    arch, model_factory, tmp_path
):
    """Qwen3.5's Q8_0 projections (linear attention's in and out, the shared expert's) load
    natively. Its answers drift further from the dequantized file's than attention-only
    models' do: the recurrent state carries one token's rounding into every later one,
    and a random model's decay ``exp(-A * softplus(a))`` with ``A`` up to 16 magnifies the
    rounding of ``a`` (measured: 0.027 nats on average, 0.18 at most, dense); a mixture of
    experts' tiny router then flips a near-tied choice, so only the dense model's answers
    are held to the dequantized ones."""
    file = write_gguf(model_factory(arch), tmp_path / "hybrid.gguf", "Q8_0")
    ours = LLM(str(file))
    model = ours._core.runner.model
    native = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, NativeLinear)}
    assert {"in_proj", "out_proj", "qkv_proj", "down_proj"} <= native
    if arch == "qwen3_5_moe_text":
        shared = [m.mlp.shared_expert.gate_up_proj for m in model.model.layers]
        assert all(isinstance(m, NativeLinear) for m in shared)
        assert sum(isinstance(m, NativeExperts) for m in model.modules()) == 4
        return
    widened = LLM(str(file), dtype="float32")
    got, want = np.array(_prompt_logprobs(ours)), np.array(_prompt_logprobs(widened))
    assert np.abs(got - want).mean() < 0.05  # a wrong scale or head order is O(1)


def test_the_tokenizer_from_gguf_metadata_equals_the_folders(model_factory, tmp_path):
    from llmkit.model.names import resolve_model

    folder = model_factory("llama")
    file = write_gguf(folder, tmp_path / "llama.gguf")
    ours, theirs = Tokenizer(resolve_model(str(file), tmp_path / "cache")), Tokenizer(folder)
    text = "Hello café naïve 日本語 🙂 the quick brown fox, 12345!"
    assert ours.encode(text) == theirs.encode(text)
    chat = [{"role": "user", "content": "Hello"}]
    assert ours.apply_chat_template(chat) == theirs.apply_chat_template(chat)
    assert ours.encode(text)[0] == ours.bos_token_id  # add_bos_token, from the metadata


@pytest.mark.parametrize(("heads", "rows"), [(9, 576), (3, 192), (2, 8)])
def test_unpermute_invertspermute(heads, rows):
    weight = torch.arange(rows * 5, dtype=torch.float32).reshape(rows, 5)
    permuted = permute(weight, heads, heads).numpy()
    assert np.array_equal(unpermute(permuted, heads), weight.numpy())
    bias = torch.arange(rows, dtype=torch.float32)
    assert np.array_equal(unpermute(permute(bias, heads, heads).numpy(), heads), bias)
