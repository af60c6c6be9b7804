"""A GGUF file's Q4_1 linear layers as w4a8 weights: the file's numbers, not requantized.

Keyed by our module names, with the fused layers' parts (q, k, v; gate, up) stacked by
rows as the float load stacks them. llama.cpp's Q/K row permutation is undone on the
blocks themselves: it moves whole rows, and a Q4_1 row is its 32-input blocks.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from llmkit.model.gguf.cache import gguf_source
from llmkit.model.gguf.config import architecture
from llmkit.model.gguf.file import field, open_gguf
from llmkit.model.gguf.weights import unpermute
from llmkit.model.layers import w4a8

if TYPE_CHECKING:
    from llmkit.config import EngineConfig

logger = logging.getLogger(__name__)

# our fused module -> the GGUF tensors whose rows it stacks, in order
_MODULES = {
    "self_attn.qkv_proj": ("attn_q", "attn_k", "attn_v"),
    "self_attn.o_proj": ("attn_output",),
    "mlp.gate_up_proj": ("ffn_gate", "ffn_up"),
    "mlp.down_proj": ("ffn_down",),
}


def native_linears(model_path: str, method: str, group_size: int) -> dict[str, w4a8.Packed]:
    """The ready-made weights for ``quantize_linears``: a GGUF file's Q4_1 layers when
    they are w4a8's own groups (``w4a8`` at group size 32), else none."""
    source = gguf_source(model_path)
    if source is None or method != "w4a8" or group_size != w4a8.BLOCK:
        return {}
    return q4_1_linears(source)


def default_native_linears(
    config: EngineConfig, model_path: str, device: torch.device, tp_size: int
) -> dict[str, w4a8.Packed]:
    """The load of a GGUF file that asks for no ``quantization``: with ``dtype='auto'``
    its Q4_1 layers as they are, for w4a8 (CPU, one process), the rest dequantized; with an
    explicit dtype, none (all dequantized, for parity checks). Logs which load it is."""
    source = gguf_source(model_path)
    if source is None or config.quantization is not None:
        return {}
    if config.dtype != "auto":
        why = f"dtype={config.dtype!r}"
    elif device.type != "cpu":
        why = f"w4a8 runs on CPU only, the model is on {device.type}"
    elif tp_size > 1:
        why = "w4a8 does not work with tensor parallelism yet"
    elif not (packed := q4_1_linears(source)):
        why = "it has no Q4_1 linear layers"
    else:
        logger.info(
            "GGUF %s: %d Q4_1 linear layers load natively (w4a8, group %d), the rest "
            "dequantized; dtype='float32' loads all dequantized",
            source,
            len(packed),
            w4a8.BLOCK,
        )
        return packed
    logger.info("GGUF %s: every tensor loads dequantized (%s)", source, why)
    return {}


def q4_1_linears(path: str | Path) -> dict[str, w4a8.Packed]:
    """``{module name: packed weight}`` for each linear layer all of whose parts are Q4_1."""
    from gguf import GGMLQuantizationType

    reader = open_gguf(path)
    arch = architecture(reader, path)
    tensors = {t.name: t for t in reader.tensors}
    heads = int(field(reader, f"{arch}.attention.head_count"))
    kv_heads = int(field(reader, f"{arch}.attention.head_count_kv", heads))
    heads_of = {"attn_q": heads, "attn_k": kv_heads} if arch == "llama" else {}
    packed = {}
    for layer in range(int(field(reader, f"{arch}.block_count"))):
        for module, parts in _MODULES.items():
            names = [f"blk.{layer}.{part}.weight" for part in parts]
            if not all(
                n in tensors and tensors[n].tensor_type == GGMLQuantizationType.Q4_1 for n in names
            ):
                continue
            found = [tensors[n] for n in names]
            blocks = []
            for part, tensor in zip(parts, found):
                rows = np.asarray(tensor.data)  # uint8 [out, in / 32 * 20]
                blocks.append(unpermute(rows, heads_of[part]) if part in heads_of else rows)
            in_features = int(found[0].shape[0])  # ggml's shape: innermost (inputs) first
            stacked = torch.from_numpy(np.concatenate(blocks))
            packed[f"model.layers.{layer}.{module}"] = w4a8.from_q4_1(stacked, in_features)
    return packed
