"""What of a GGUF file loads as it is, not widened to float: its numbers, not requantized.

Q4_1 and Q4_0 linear layers become w4a8 weights (a scale and min per 32 inputs: Q4_0's
``d * (q - 8)`` is the min ``-8 d``); Q8_0 linear layers, the Q8_0 token embedding and the
LM head become q8 weights (:mod:`llmkit.model.layers.q8`), the head tied to the embedding
sharing its codes. Fused layers (q, k, v; gate, up) stack their parts' rows, as the float
load does, and load natively only when every part is of one native kind. llama.cpp's Q/K row
permutation is undone on the blocks themselves: it moves whole rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn

from llmkit.model.gguf.packed_cache import PackedCache
from llmkit.model.gguf.tensors import TensorTable
from llmkit.model.layers import q8, w4a8
from llmkit.model.layers.quant import QuantizedLinear

if TYPE_CHECKING:
    from llmkit.config import EngineConfig

logger = logging.getLogger(__name__)

# our fused module -> the GGUF tensors whose rows it stacks, in order
_LINEARS = {
    "self_attn.qkv_proj": ("attn_q", "attn_k", "attn_v"),
    "self_attn.o_proj": ("attn_output",),
    "mlp.gate_up_proj": ("ffn_gate", "ffn_up"),
    "mlp.down_proj": ("ffn_down",),
}
Reader = Callable[[torch.Tensor, int], w4a8.Packed | q8.Packed]  # (rows, inputs) -> weight
_W4A8: dict[str, Reader] = {"Q4_1": w4a8.from_q4_1, "Q4_0": w4a8.from_q4_0}
_Q8: dict[str, Reader] = {"Q8_0": q8.from_q8_0}
EMBEDDING, HEAD = "model.embed_tokens", "lm_head"


@dataclass
class NativeWeights:
    """Modules to put in place of the float ones, by name (each made from the float module
    it replaces, for its shape and bias), and the GGUF tensors they hold."""

    modules: dict[str, Callable[[Any], nn.Module]] = field(default_factory=dict)  # old -> new
    tensors: set[str] = field(default_factory=set)

    def install(self, model: nn.Module) -> None:
        for name, make in self.modules.items():
            parent, _, child = name.rpartition(".")
            owner = model.get_submodule(parent) if parent else model
            setattr(owner, child, make(owner.get_submodule(child)))


def linears_only(table: TensorTable | None, method: str, group_size: int) -> NativeWeights:
    """With ``quantization="w4a8"`` at group size 32: the file's Q4 layers as they are
    (the rest are quantized from their float load); else nothing."""
    if table is None or method != "w4a8" or group_size != w4a8.BLOCK:
        return NativeWeights()
    return _plan(table, _W4A8, with_embedding=False)


def default_native(
    config: EngineConfig, table: TensorTable | None, device: torch.device, tp_size: int
) -> NativeWeights:
    """The load of a GGUF file that asks for no ``quantization``: with ``dtype='auto'`` every
    tensor that has a native kind as it is (CPU, one process), the rest dequantized; with an
    explicit dtype, nothing (all dequantized, for parity checks). Logs which load it is."""
    if table is None or config.quantization is not None:
        return NativeWeights()
    if config.dtype != "auto":
        why = f"dtype={config.dtype!r}"
    elif device.type != "cpu":
        why = f"its quantized kernels run on CPU only, the model is on {device.type}"
    elif tp_size > 1:
        why = "its quantized layers do not work with tensor parallelism yet"
    else:
        kinds = {**_W4A8, **_Q8}
        plan = _plan(table, kinds, with_embedding=True)
        widened = sorted({t.type for t in table.tensors.values()} - {"F32", "F16", *kinds})
        logger.info(
            "GGUF %s: %d of %d tensors load as they are (Q4_0/Q4_1 as w4a8, Q8_0 as q8), "
            "the rest dequantized%s; dtype='float32' loads all dequantized",
            table.file,
            len(plan.tensors),
            len(table.tensors),
            f" (no native kernel for {', '.join(widened)} yet)" if widened else "",
        )
        return plan
    logger.info("GGUF %s: every tensor loads dequantized (%s)", table.file, why)
    return NativeWeights()


def _plan(
    table: TensorTable,
    kinds: dict[str, Reader],
    with_embedding: bool,
) -> NativeWeights:
    plan = NativeWeights()
    cache = PackedCache(table.file)
    layers = {int(n.split(".")[1]) for n in table.tensors if n.startswith("blk.")}
    for layer in sorted(layers):
        for module, parts in _LINEARS.items():
            names = [f"blk.{layer}.{part}.weight" for part in parts]
            _linear(plan, table, kinds, f"model.layers.{layer}.{module}", names, cache)
    if with_embedding:
        _embedding(plan, table, cache)
        _linear(plan, table, kinds, HEAD, ["output.weight"], cache)
    cache.save()
    return plan


def _embedding(plan: NativeWeights, table: TensorTable, cache: PackedCache) -> None:
    """The Q8_0 token embedding, and the head tied to it where the file has none."""
    embedding = table.tensors.get("token_embd.weight")
    if embedding is not None and embedding.type in _Q8:
        make = lambda: q8.from_q8_0(_rows(table, [embedding.name]), embedding.shape[1])  # noqa: E731
        packed = cast(q8.Packed, cache.get(EMBEDDING, make))
        plan.modules[EMBEDDING] = lambda old: q8.Q8Embedding(
            packed, old.num_embeddings, old.embedding_dim, old.weight.dtype
        )
        plan.tensors.add(embedding.name)
        if "output.weight" not in table.tensors:  # the head is the embedding, tied
            plan.modules[HEAD] = lambda old: q8.Q8Linear(
                packed, old.in_features, old.out_features, None
            )


def _linear(
    plan: NativeWeights,
    table: TensorTable,
    kinds: dict[str, Reader],
    module: str,
    names: list[str],
    cache: PackedCache,
) -> None:
    """Plan ``module`` from tensors ``names`` if all are there and of one native kind."""
    infos = [table.tensors.get(n) for n in names]
    types = {info.type if info else None for info in infos}
    if len(types) != 1 or (kind := types.pop()) not in kinds:
        return
    in_features = infos[0].shape[1]  # type: ignore[union-attr]
    packed = cache.get(module, lambda: kinds[kind](_rows(table, names), in_features))
    if isinstance(packed, q8.Packed):
        plan.modules[module] = lambda old: q8.Q8Linear(
            packed, old.in_features, old.out_features, old.bias
        )
    else:
        plan.modules[module] = lambda old: QuantizedLinear(old, "w4a8", w4a8.BLOCK, packed)
    plan.tensors.update(names)


def _rows(table: TensorTable, names: list[str]) -> torch.Tensor:
    """The tensors' raw rows stacked, copied out of the file's mapping."""
    return torch.from_numpy(np.concatenate([table.rows(n) for n in names]))
