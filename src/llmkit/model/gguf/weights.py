"""A GGUF file's tensors under HF parameter names, dequantized, with llama.cpp's Q/K order undone.

Every tensor is dequantized to float32 here (the model's ``copy_`` casts to its dtype).
With ``quantization="w4a8"`` at group size 32, the Q4_1 linear layers are then replaced by
the file's own blocks (:mod:`llmkit.model.gguf.native`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from llmkit.model.gguf.config import architecture
from llmkit.model.gguf.file import field, open_gguf

if TYPE_CHECKING:
    from gguf import GGUFReader, ReaderTensor

_GLOBAL = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
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
}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def hf_name(name: str) -> str | None:
    """The HF parameter name of GGUF tensor ``name``, or None if llmkit has no use for it."""
    base, _, kind = name.rpartition(".")
    if base in _GLOBAL and kind in ("weight", "bias"):
        return f"{_GLOBAL[base]}.{kind}"
    m = _BLOCK.fullmatch(name)
    if m and m.group(2) in _LAYER:
        return f"model.layers.{m.group(1)}.{_LAYER[m.group(2)]}.{m.group(3)}"
    return None


def unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's ``LlamaModel.permute``: each head's rows go back from interleaved
    rotary pairs (its kernel's order) to HF's two halves (``rotate_half``)."""
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def check_tensors(reader: GGUFReader, path: str | Path) -> None:
    """``ValueError`` naming the tensor if one is of a type llmkit cannot read or has no place."""
    from gguf import dequantize

    for tensor in reader.tensors:
        if hf_name(tensor.name) is None:
            raise ValueError(f"{path}: unexpected tensor {tensor.name} for this architecture")
        try:  # one row is enough to know whether the reader can dequantize this type
            dequantize(tensor.data[:1], tensor.tensor_type)
        except NotImplementedError:
            raise ValueError(
                f"{path}: tensor {tensor.name} has quantization type "
                f"{tensor.tensor_type.name}, which llmkit cannot read"
            ) from None


def iter_gguf_weights(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor of the file as ``(hf_name, float32 tensor)``, in HF's layout."""
    reader = open_gguf(path)
    check_tensors(reader, path)
    permute = architecture(reader, path) == "llama"  # llama.cpp permutes only this family
    heads = int(field(reader, "llama.attention.head_count", 0))
    kv_heads = int(field(reader, "llama.attention.head_count_kv", heads))
    for tensor in reader.tensors:
        name = hf_name(tensor.name)
        assert name is not None  # check_tensors refused the others
        weight = _dequantized(tensor)
        if permute and ".attn_q." in tensor.name:
            weight = unpermute(weight, heads)
        elif permute and ".attn_k." in tensor.name:
            weight = unpermute(weight, kv_heads)
        yield name, torch.from_numpy(np.ascontiguousarray(weight))


def _dequantized(tensor: ReaderTensor) -> np.ndarray:
    from gguf import dequantize

    # ggml's shape is innermost first; numpy's (and torch's) is outermost first.
    shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))
    return dequantize(tensor.data, tensor.tensor_type).reshape(shape).astype(np.float32)
