"""A GGUF file's tensors under HF parameter names, dequantized, with llama.cpp's Q/K order undone.

Every tensor read here is dequantized to float32 (the model's ``copy_`` casts to its dtype);
those that load as they are (:mod:`llmkit.model.gguf.native`) are skipped. What the converter
added to a family's norm weights (Gemma 3's one) is taken off.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Set

import numpy as np
import torch

from llmkit.model import registry
from llmkit.model.gguf.tensors import TensorTable

_GLOBAL = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    # Per-layer inputs (Gemma 4's): a second embedding, and a projection of the first.
    "per_layer_token_embd": "model.embed_tokens_per_layer",
    "per_layer_model_proj": "model.per_layer_model_projection",
    "per_layer_proj_norm": "model.per_layer_projection_norm",
}
_LAYER = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    # A mixture of experts: the router, and every expert's projection stacked [E, ...].
    "ffn_gate_inp": "mlp.gate",
    "ffn_gate_exps": "mlp.experts.gate_proj",
    "ffn_up_exps": "mlp.experts.up_proj",
    "ffn_down_exps": "mlp.experts.down_proj",
}
# A layer's weight, bias or scale (Gemma 4's router and per-expert scales), or a parameter
# of its own (Qwen3.5's ssm_a).
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)(?:\.(weight|bias|scale))?")


@functools.cache
def _layer_table(arch: str) -> dict[str, str]:
    """GGUF tensor name piece -> HF module, for a file of architecture ``arch``."""
    entry = registry.by_gguf(arch)
    return {**_LAYER, **(entry.gguf_tensors if entry is not None else {})}


def _facts(arch: str) -> tuple[str, ...]:
    """The tensors of a file of architecture ``arch`` its config is read from, not weights."""
    entry = registry.by_gguf(arch)
    return () if entry is None else entry.gguf_reads


def gguf_piece(module: str, arch: str) -> str:
    """The GGUF tensor name piece of a decoder layer's HF module (``self_attn.q_proj``:
    ``attn_q``) in a file of architecture ``arch``."""
    return next(gguf for gguf, hf in _layer_table(arch).items() if hf == module)


def hf_name(name: str, arch: str) -> str | None:
    """The HF parameter name of GGUF tensor ``name`` in a file of architecture ``arch``, or
    None if llmkit has no use for it."""
    base, _, kind = name.rpartition(".")
    if base in _GLOBAL and kind in ("weight", "bias"):
        return f"{_GLOBAL[base]}.{kind}"
    m = _BLOCK.fullmatch(name)
    layer = _layer_table(arch)
    if m and m.group(2) in layer:
        kind = f".{m.group(3)}" if m.group(3) else ""
        return f"model.layers.{m.group(1)}.{layer[m.group(2)]}{kind}"
    return None


def check_tensors(table: TensorTable) -> None:
    """``ValueError`` naming the tensor if one is of a type llmkit cannot read or has no place."""
    from gguf import GGML_QUANT_SIZES, dequantize

    facts = _facts(table.arch)
    for tensor in table.tensors.values():
        if tensor.name in facts:
            continue
        if hf_name(tensor.name, table.arch) is None:
            raise ValueError(f"{table.file}: unexpected tensor {tensor.name} for this architecture")
        try:  # one zero block is enough to know whether the reader can dequantize this type
            dequantize(np.zeros((1, GGML_QUANT_SIZES[tensor.qtype][1]), np.uint8), tensor.qtype)
        except (NotImplementedError, KeyError):
            raise ValueError(
                f"{table.file}: tensor {tensor.name} has quantization type {tensor.type}, "
                "which llmkit cannot read"
            ) from None


def iter_gguf_weights(
    table: TensorTable, skip: Set[str] = frozenset()
) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor of the file but those in ``skip`` (GGUF names) and the family's facts, as
    ``(hf_name, float32 tensor)`` in HF's layout."""
    entry = registry.by_gguf(table.arch)
    shift = 0.0 if entry is None else entry.gguf_norm_shift
    unshifted = () if entry is None else entry.gguf_unshifted
    for name in table.tensors:
        if name in skip or name in _facts(table.arch):
            continue
        target = hf_name(name, table.arch)
        assert target is not None  # check_tensors refused the others when the cache was built
        tensor = torch.from_numpy(np.ascontiguousarray(table.dequantized(name)))
        shifted = target.endswith("norm.weight") and not target.endswith(unshifted)
        yield target, (tensor - shift if shift and shifted else tensor)
