"""What of a GGUF file loads as it is, not widened to float: its numbers, not requantized.

Every tensor whose type has a kernel (:data:`llmkit.model.layers.weights.registry.FORMATS`: Q4_0,
Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MXFP4) loads in that format: linear layers as
:class:`NativeLinear`, whose fused parts (q, k, v; gate, up) may each be of another format
(a Q4_K_M file's v is Q6_K on some layers), the token embedding as :class:`NativeEmbedding`,
and the LM head, which shares the embedding's blocks when tied. llama.cpp's Q/K row
permutation is undone on the blocks themselves: it moves whole rows. The rest is dequantized;
the log names those tensors and what they will cost, and a file whose dequantized tensors
would not fit in the machine's memory is refused before anything loads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from llmkit.model.cpu_memory import available_memory
from llmkit.model.gguf.packed import PackedStore
from llmkit.model.gguf.tensors import TensorTable
from llmkit.model.gguf.weights import gguf_piece
from llmkit.model.layers.moe import NativeExperts
from llmkit.model.layers.native import NativeEmbedding, NativeLinear, Part
from llmkit.model.layers.weights.kernel import TILE
from llmkit.model.layers.weights.registry import FORMATS, METHODS, WeightFormat

if TYPE_CHECKING:
    from llmkit.config import EngineConfig

logger = logging.getLogger(__name__)

Projections = dict[str, tuple[str, ...]]  # the model class's: our module -> its HF pieces
EMBEDDING, HEAD = "model.embed_tokens", "lm_head"
_FLOAT = ("F32", "F16", "BF16")


@dataclass
class NativeWeights:
    """Modules to put in place of the float ones, by name (each made from the float module
    it replaces, for its shape and bias), and the GGUF tensors they hold."""

    modules: dict[str, Callable[[Any], nn.Module]] = field(default_factory=dict)  # old -> new
    tensors: set[str] = field(default_factory=set)

    def install(self, model: nn.Module) -> list[nn.Module]:
        """Put the modules in place; returns those they replaced. A new one may keep an old
        one's parameter (its bias), whose weight loader is a method of the old module held
        weakly: the caller keeps them until the weights are loaded."""
        replaced = []
        for name, make in self.modules.items():
            parent, _, child = name.rpartition(".")
            owner = model.get_submodule(parent) if parent else model
            old = owner.get_submodule(child)
            setattr(owner, child, make(old))
            replaced.append(old)
        return replaced


def linears_only(
    table: TensorTable | None, method: str, group_size: int, projections: Projections
) -> NativeWeights:
    """With a ``quantization=`` method that is a kernel's format (w4a8: Q4_1's) at a group
    size of that format's block: the file's layers of that kernel's formats as they are
    (w4a8 at 32: Q4_0 and Q4_1), the rest quantized from their float load; else nothing."""
    fmt = METHODS.get(method)
    if table is None or fmt is None or group_size != fmt.spec.block_inputs:
        return NativeWeights()
    alike = {name: f for name, f in FORMATS.items() if f.kernel is fmt.kernel}
    return _plan(table, alike, projections, with_embedding=False)


def default_native(
    config: EngineConfig,
    table: TensorTable | None,
    device: torch.device,
    tp_size: int,
    projections: Projections,
) -> NativeWeights:
    """The load of a GGUF file that asks for no ``quantization``: with ``dtype='auto'`` every
    tensor that has a native format as it is (CPU, one process), the rest dequantized; with
    an explicit dtype, nothing (all dequantized, for parity checks). Logs which load it is,
    and refuses a file whose dequantized tensors would not fit in memory."""
    if table is None or config.quantization is not None:
        return NativeWeights()
    # The dequantized tensors stay in host memory on CPU only (one at a time passes through
    # it on the way to a GPU), in the model's dtype: float32 unless one is named.
    size = 4 if config.dtype == "auto" else getattr(torch, config.dtype).itemsize
    check = size if device.type == "cpu" else 0
    if config.dtype != "auto":
        why = f"dtype={config.dtype!r}"
    elif device.type != "cpu":
        why = f"its quantized kernels run on CPU only, the model is on {device.type}"
    elif tp_size > 1:
        why = "its quantized layers do not work with tensor parallelism yet"
    else:
        plan = _plan(table, FORMATS, projections, with_embedding=True)
        _log_widened(table, plan.tensors, check)
        return plan
    _log_widened(table, set(), check, why)
    return NativeWeights()


def _log_widened(table: TensorTable, native: set[str], size: int, why: str = "") -> None:
    """Log what loads as it is and what is dequantized (the tensors and their size at
    ``size`` bytes a weight, float32's if 0); with a ``size``, raise where the dequantized
    tensors would not fit in the memory available."""
    widened = [t for t in table.tensors.values() if t.name not in native]
    quantized = [t for t in widened if t.type not in _FLOAT]
    cost = sum((size or 4) * int(np.prod(t.shape)) for t in widened)
    available = available_memory()
    if size and cost > available:
        raise ValueError(
            f"GGUF {table.file}: its dequantized tensors need {cost / 2**30:.2f} GiB of memory "
            f"but the machine has {available / 2**30:.2f} GiB available"
            + (f" ({why})" if why else "")
        )
    kinds = sorted({table.tensors[name].type for name in native})
    logger.info(
        "GGUF %s: %d quantized tensors load as they are%s, %d dequantized (%.1f MiB with the %d "
        "float tensors)%s",
        table.file,
        len(native),
        f" ({', '.join(kinds)})" if kinds else "",
        len(quantized),
        cost / 2**20,
        len(widened) - len(quantized),
        f": {why}" if why else "",
    )
    if quantized and not why:
        names = ", ".join(t.name for t in quantized[:8]) + (", ..." if len(quantized) > 8 else "")
        logger.warning(
            "GGUF %s: no native kernel for %s: %d tensors dequantized (%s)",
            table.file,
            ", ".join(sorted({t.type for t in quantized})),
            len(quantized),
            names,
        )


def _plan(
    table: TensorTable,
    formats: dict[str, WeightFormat],
    projections: Projections,
    with_embedding: bool,
) -> NativeWeights:
    plan, store = NativeWeights(), PackedStore(table.folder, table.file)
    layers = {int(n.split(".")[1]) for n in table.tensors if n.startswith("blk.")}
    for layer in sorted(layers):
        for module, pieces in projections.items():
            owner = module.partition(".")[0]
            names = [f"blk.{layer}.{gguf_piece(f'{owner}.{p}', table.arch)}.weight" for p in pieces]
            _linear(plan, table, formats, store, f"model.layers.{layer}.{module}", names)
        _experts(plan, table, formats, store, layer)
    embedding = table.tensors.get("token_embd.weight")
    if with_embedding and embedding is not None and embedding.type in formats:
        part = _part(table, formats, store, embedding.name)
        plan.modules[EMBEDDING] = lambda old: NativeEmbedding(
            part, old.embedding_dim, old.weight.dtype
        )
        plan.tensors.add(embedding.name)
        if "output.weight" not in table.tensors:  # the head is the embedding, tied
            plan.modules[HEAD] = lambda old: NativeLinear(
                [part], old.in_features, old.out_features, None
            )
    if with_embedding:
        _linear(plan, table, formats, store, HEAD, ["output.weight"])
    store.save()
    return plan


def _linear(
    plan: NativeWeights,
    table: TensorTable,
    formats: dict[str, WeightFormat],
    store: PackedStore,
    module: str,
    names: list[str],
) -> None:
    """Plan ``module`` from tensors ``names`` if all are there, each of a native format."""
    infos = [table.tensors.get(n) for n in names]
    if any(info is None or info.type not in formats for info in infos):
        return
    parts = [_part(table, formats, store, name) for name in names]
    plan.modules[module] = lambda old: NativeLinear(
        parts, old.in_features, old.out_features, old.bias
    )
    plan.tensors.update(names)


def _experts(
    plan: NativeWeights,
    table: TensorTable,
    formats: dict[str, WeightFormat],
    store: PackedStore,
    layer: int,
) -> None:
    """Plan layer ``layer``'s experts as :class:`NativeExperts` if its three stacked
    projections are there, each of a native format, every expert whole tiles of rows."""
    names = [f"blk.{layer}.ffn_{p}_exps.weight" for p in ("gate", "up", "down")]
    infos = [table.tensors.get(n) for n in names]
    if any(info is None or info.type not in formats for info in infos):
        return
    if any(info.shape[1] % TILE for info in infos if info is not None):
        return
    gate, up, down = (_part(table, formats, store, name) for name in names)

    def make(old: Any) -> NativeExperts:
        biases = None if old.b13 is None else (old.b13, old.b2)
        return NativeExperts(
            (gate, up, down), old.num_experts, old.hidden, old.inter, old.act, biases
        )

    plan.modules[f"model.layers.{layer}.mlp.experts"] = make
    plan.tensors.update(names)


def _part(
    table: TensorTable, formats: dict[str, WeightFormat], store: PackedStore, name: str
) -> Part:
    """Tensor ``name``'s weight for its format's kernel: from the store, else its rows (copied
    out of the file's mapping) laid out. A stacked tensor ``[E, rows, in]`` (experts) is one
    weight of ``E * rows`` rows."""
    info, fmt = table.tensors[name], formats[table.tensors[name].type]
    rows = int(np.prod(info.shape[:-1]))

    def make() -> Any:
        blocks = np.array(table.rows(name)).reshape(rows, -1)
        return fmt.read(torch.from_numpy(blocks), info.shape[-1])

    return Part(fmt, store.get(name, fmt, make), rows)
