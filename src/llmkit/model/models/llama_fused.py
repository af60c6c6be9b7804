"""A llama-family decode step's layers in one C call, where the layers' weights are native
formats on CPU.

At one stream SmolLM2's 30 layers spent ~6 ms a token in the torch ops and module calls
around their matmuls (~35 ops a layer on one row) against ~9 ms in the matmuls; the kernel
``llmkit/kernels/cpu/llama_decode.c`` runs every layer of a decode step in one OpenMP region
(see there). :class:`FusedDecode` decides per step whether it applies: one query row per
request, float32 or float16 KV caches on CPU, one rank, and every layer plain (its linears'
weights in w4a8, q8, kq or mxfp4 formats: a GGUF's Q4_0/Q4_1/Q8_0/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K/
MXFP4 in any mix, or ``quantization="w4a8"``/``"w8a8"``; float32 norms, no q/k norm, no
LoRA); else the model runs its layers as modules, as before.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import torch
from torch import nn

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.build import load_function
from llmkit.model.attention.base import AttentionMetadata
from llmkit.model.context import ForwardContext
from llmkit.model.layers import kquant, mxfp4, q8, w4a8
from llmkit.model.layers.activation import SiluAndMul
from llmkit.model.layers.native import NativeLinear
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.layers.q8 import Q8Linear
from llmkit.model.layers.quant import QuantizedLinear
from llmkit.model.layers.rotary import RotaryEmbedding


class LlamaStack(Protocol):
    """What the kernel reads of a :class:`llmkit.model.models.llama.LlamaModel` (named by
    shape, not imported: that module imports this one)."""

    layers: nn.ModuleList
    rotary: RotaryEmbedding
    norm: RMSNorm

    def run_layers(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor: ...


SOURCE = SOURCES / "llama_decode.c"
_I64, _P = ctypes.c_int64, ctypes.c_void_p
_MAX_HEAD_DIM = 512  # the kernel's RoPE scratch
_MAX_PARTS = 3  # q, k, v


class _Part(ctypes.Structure):
    _fields_ = [
        *((name, _P) for name in ("w", "hi", "scale", "min", "d", "dmin")),
        ("N", _I64),
        ("kind", _I64),  # 0 w4a8, 1 q8, 2 kq, 3 mxfp4
        ("fmt", _I64),  # kq's format
    ]


class _Linear(ctypes.Structure):
    _fields_ = [
        ("part", _Part * _MAX_PARTS),
        ("parts", _I64),
        ("mxfp4", _I64),  # whether a part is: the input's block sums are made for it
        ("bias", _P),
        *((name, _I64) for name in ("K", "Kp", "N", "G")),
    ]


class _Layer(ctypes.Structure):
    _fields_ = [
        ("norm1", _P),
        ("norm2", _P),
        ("qkv", _Linear),
        ("o", _Linear),
        ("gate_up", _Linear),
        ("down", _Linear),
        ("k_cache", _P),
        ("v_cache", _P),
    ]


class _Model(ctypes.Structure):
    _fields_ = [
        *((name, _I64) for name in ("layers", "hidden", "heads", "kv_heads", "head_dim")),
        *((name, _I64) for name in ("inter", "block_size", "kv_half")),
        ("eps", ctypes.c_float),
        ("scale", ctypes.c_float),
        ("cos", _P),
        ("sin", _P),
        ("layer", ctypes.POINTER(_Layer)),
    ]


@functools.cache
def load() -> Callable[..., int] | None:
    """The compiled kernel, or None where it cannot be built here (no AVX2, no compiler)."""
    return load_function(SOURCE, "llama_decode", [_P] * 6 + [_I64] * 3)


def _part(packed: Any, out_features: int) -> tuple[_Part, int, int | None] | None:
    """A weight's view for the kernel, its padded input count and its group (None: q8's and
    mxfp4's, which read no group sums); None for a format the kernel has no matmul for."""
    ptr = [t.data_ptr() if isinstance(t, torch.Tensor) and t.numel() else None for t in packed]
    if isinstance(packed, w4a8.Packed):
        kp = packed.codes.shape[1] * 8  # a tile's 32-byte rows hold 8 inputs of 4-bit codes
        part = _Part(ptr[0], None, ptr[1], ptr[2], None, None, out_features, 0, 0)
        return part, kp, kp // packed.scales.shape[1]
    if isinstance(packed, q8.Packed):  # 4 inputs of 8-bit codes a row
        return (
            _Part(ptr[0], None, ptr[1], *[None] * 3, out_features, 1, 0),
            packed.codes.shape[1] * 4,
            None,
        )
    if isinstance(packed, mxfp4.Packed):  # 8 inputs of 4-bit codes a row, as w4a8's
        part = _Part(ptr[0], None, ptr[1], *[None] * 3, out_features, 3, 0)
        return part, packed.codes.shape[1] * 8, None
    if isinstance(packed, kquant.Packed):
        fmt = kquant.FORMATS.index(packed.fmt)
        return _Part(*ptr[1:], out_features, 2, fmt), packed.lo.shape[1] * 8, 32
    return None


def _weights(layer: object) -> list[tuple[Any, int]] | None:
    """A float32 layer's native weights and their output counts, or None for another kind."""
    if isinstance(layer, NativeLinear):
        return [(p.packed, p.out_features) for p in layer.parts]
    if isinstance(layer, QuantizedLinear) and layer.dtype == torch.float32:
        if layer.method == "w4a8":
            return [(layer._w4a8_packed(), layer.out_features)]
        if layer.method == "w8a8":
            return [(q8.Packed(layer.qweight, layer.scales), layer.out_features)]
    if isinstance(layer, Q8Linear):
        return [(q8.Packed(layer.codes, layer.scales), layer.out_features)]
    return None


def _linear(layer: Any) -> _Linear | None:
    """The kernel's view of a layer whose weights are all of the kernel's formats, on one
    input layout (one padded input count, one group); None for any other."""
    weights = _weights(layer)
    bias: torch.Tensor | None = getattr(layer, "bias", None)
    if weights is None or len(weights) > _MAX_PARTS:
        return None
    if bias is not None and bias.dtype != torch.float32:
        return None
    found = [_part(packed, n) for packed, n in weights]
    parts = [p for p in found if p is not None]
    if len(parts) != len(found):
        return None
    padded = {kp for _, kp, _ in parts}
    groups = {g for _, _, g in parts if g is not None}
    if len(padded) != 1 or len(groups) > 1:
        return None
    array = (_Part * _MAX_PARTS)(*(p for p, _, _ in parts))
    bias_ptr = 0 if bias is None else bias.data_ptr()
    kp = padded.pop()
    return _Linear(
        array,
        len(parts),
        any(isinstance(packed, mxfp4.Packed) for packed, _ in weights),
        bias_ptr,
        layer.in_features,
        kp,
        layer.out_features,
        groups.pop() if groups else 32,
    )


def _layer(layer: Any, caches: tuple[torch.Tensor, torch.Tensor]) -> _Layer | None:
    """A ``LlamaDecoderLayer``'s view for the kernel, or None where it does not fit: a
    layer of another family's kind (a window, sinks, sandwich norms, another activation,
    experts) runs as modules."""
    attn, mlp = layer.self_attn, layer.mlp
    if not attn.spec.plain or layer.sandwich or type(getattr(mlp, "act", None)) is not SiluAndMul:
        return None
    norms = (layer.input_layernorm, layer.post_attention_layernorm)
    linears = [_linear(m) for m in (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj)]
    if attn.q_norm is not None or any(n.weight.dtype != torch.float32 for n in norms):
        return None
    if any(n.eps != norms[0].eps for n in norms) or None in linears:
        return None
    k_cache, v_cache = caches
    return _Layer(
        norms[0].weight.data_ptr(),
        norms[1].weight.data_ptr(),
        *linears,
        k_cache.data_ptr(),
        v_cache.data_ptr(),
    )


class _Plan:
    """The kernel's arguments that hold for every step on the same KV caches."""

    def __init__(self, model: _Model, layers: ctypes.Array[_Layer], kv_caches: list) -> None:
        self.model, self.layers, self.kv_caches = model, layers, kv_caches


class FusedDecode:
    """Runs a ``LlamaModel``'s layers for a decode step in one call where it can."""

    def __init__(self, tp_size: int) -> None:
        self.enabled = tp_size == 1  # a sharded layer's output is summed over the ranks
        self._plan: _Plan | None = None
        self._unfit: list | None = None  # the KV caches found unfit, not checked again

    def __call__(
        self, model: LlamaStack, x: torch.Tensor, ctx: ForwardContext
    ) -> torch.Tensor | None:
        """The step's last hidden states from its input rows ``x`` ``[T, hidden]`` (a fresh
        tensor, updated in place), or None (nothing done) where the kernel does not apply.

        In a step that mixes decodes with longer chunks (prefills), the decodes still go
        to the kernel and the rest through the modules: a request's numbers then never
        depend on what else shares its step (its greedy tokens neither).
        """
        meta = ctx.meta
        if not self.enabled or x.dtype != torch.float32:
            return None
        plan = self._plan_for(model, ctx)
        if plan is None:
            return None
        if meta.max_query_len == 1 and x.shape[0] == meta.num_reqs:
            return self._run(plan, x.contiguous(), ctx.positions, meta)
        starts = meta.query_start_loc_host
        one = [i for i in range(meta.num_reqs) if starts[i + 1] - starts[i] == 1]
        if not one:
            return None
        out = torch.empty_like(x)
        decode_meta, rows = meta.select(one)
        out[rows] = self._run(plan, x[rows], ctx.positions[rows], decode_meta)
        rest = [i for i in range(meta.num_reqs) if starts[i + 1] - starts[i] > 1]
        if rest:  # (a request with no rows this step needs nothing)
            other_meta, rows = meta.select(rest)
            other = replace(ctx, positions=ctx.positions[rows], meta=other_meta)
            out[rows] = model.run_layers(x[rows], other)
        return out

    def _run(
        self, plan: _Plan, x: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata
    ) -> torch.Tensor:
        """Every layer on decode rows ``x`` (contiguous, updated in place)."""
        kernel = load()
        assert kernel is not None  # a plan is made only where it loads
        status = kernel(
            ctypes.byref(plan.model),
            x.data_ptr(),
            positions.data_ptr(),
            meta.slot_mapping.data_ptr(),
            meta.block_tables.data_ptr(),
            meta.seq_lens.data_ptr(),
            x.shape[0],
            meta.block_tables.shape[1],
            torch.get_num_threads(),
        )
        if status != 0:
            raise MemoryError("the fused decode kernel ran out of memory")
        return x

    def _plan_for(self, model: LlamaStack, ctx: ForwardContext) -> _Plan | None:
        caches = ctx.kv_caches
        if self._plan is not None and self._plan.kv_caches is caches:
            return self._plan
        if self._unfit is caches:
            return None
        self._plan = _make_plan(model, caches) if _fits(ctx) else None
        if self._plan is None:
            self._unfit = caches
        return self._plan


def _fits(ctx: ForwardContext) -> bool:
    """Whether the KV caches are what the kernel reads (CPU, float32 or float16 alike,
    contiguous), and the kernel builds here."""
    tensors = [t for pair in ctx.kv_caches for t in pair]
    return (
        ctx.backend.name == "torch"
        and all(t.device.type == "cpu" and t.is_contiguous() for t in tensors)
        and len({t.dtype for t in tensors}) == 1
        and tensors[0].dtype in (torch.float32, torch.float16)
        and ctx.positions.dtype == torch.int64
        and load() is not None
    )


def _make_plan(model: LlamaStack, kv_caches: list) -> _Plan | None:
    decoders: list[Any] = list(model.layers)
    first, rotary = decoders[0].self_attn, model.rotary
    if first.head_dim > _MAX_HEAD_DIM or rotary.cos.dtype != torch.float32:
        return None
    found = [_layer(layer, caches) for layer, caches in zip(decoders, kv_caches)]
    layers = [layer for layer in found if layer is not None]
    if len(layers) != len(decoders):
        return None
    array = (_Layer * len(layers))(*layers)
    spec = _Model(
        len(layers),
        model.norm.weight.shape[0],
        first.num_heads,
        first.num_kv_heads,
        first.head_dim,
        decoders[0].mlp.down_proj.in_features,
        kv_caches[0][0].shape[1],
        kv_caches[0][0].dtype == torch.float16,
        decoders[0].input_layernorm.eps,
        first.scale,
        rotary.cos.data_ptr(),
        rotary.sin.data_ptr(),
        array,
    )
    return _Plan(spec, array, kv_caches)
