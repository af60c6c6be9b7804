"""What the fused decode kernel (``kernels/cpu/llama_decode.c``) reads of a decoder layer:
ctypes mirrors of its structs, and the views of our layers that fill them, or None where a
layer does not fit the kernel (another weight format, dtype or activation)."""

from __future__ import annotations

import ctypes
from typing import Any

import torch

from llmkit.model.layers.activation import ClampedSwiGLU, GeluTanhAndMul, SiluAndMul
from llmkit.model.layers.native import NativeLinear
from llmkit.model.layers.weights.kernel import Fused
from llmkit.model.layers.weights.registry import fused_view

I64, P, F32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
MAX_PARTS = 4  # q, k, v; a linear attention's in-projection: q/k/v, z, b, a
FIELDS = ("w", "hi", "scale", "min", "d", "dmin")  # a Part's weight fields, in order


class Part(ctypes.Structure):
    _fields_ = [
        *((name, P) for name in FIELDS),
        ("N", I64),
        ("kind", I64),  # its kernel: weights/table.py's number
        ("fmt", I64),  # its layout in its kernel
    ]


class Linear(ctypes.Structure):
    _fields_ = [
        ("part", Part * MAX_PARTS),
        ("parts", I64),
        ("sums", I64),  # whether a part reads the input's code sums (Fused.code_sums)
        ("bias", P),
        *((name, I64) for name in ("K", "Kp", "N", "G")),
    ]


class Act(ctypes.Structure):
    _fields_ = [("kind", I64), ("alpha", F32), ("limit", F32)]  # 0 SiLU, 1 GELU(tanh), 2 clamped


def pointer(t: torch.Tensor | None) -> int | None:
    return t.data_ptr() if t is not None and t.numel() else None


def part(packed: Any, out_features: int) -> tuple[Part, Fused] | None:
    """A weight's view for the kernel, and its kernel's account of it; None for a weight
    the kernel has no matmul for."""
    found = fused_view(packed)
    if found is None:
        return None
    kind, fused = found
    return Part(*map(pointer, fused.tensors), out_features, kind, fused.layout), fused


def weights(layer: object) -> list[tuple[Any, int]] | None:
    """A layer's native weights and their output counts, or None for another kind."""
    if isinstance(layer, NativeLinear):
        return [(p.packed, p.out_features) for p in layer.parts]
    return None


def linear_of(
    found: list[tuple[Any, int]] | None, in_features: int, bias: torch.Tensor | None
) -> Linear | None:
    """The kernel's view of weights ``found`` (packed, outputs) side by side, all on one
    input layout (one padded input count, one group); None for any other."""
    if found is None or len(found) > MAX_PARTS or not floats(bias):
        return None
    viewed = [part(packed, n) for packed, n in found]
    parts = [p for p in viewed if p is not None]
    if len(parts) != len(viewed):
        return None
    padded = {f.padded_inputs for _, f in parts}
    groups = {f.group for _, f in parts if f.group is not None}
    if len(padded) != 1 or len(groups) > 1:
        return None
    array = (Part * MAX_PARTS)(*(p for p, _ in parts))
    return Linear(
        array,
        len(parts),
        any(f.code_sums for _, f in parts),
        pointer(bias),
        in_features,
        padded.pop(),
        sum(n for _, n in found),
        groups.pop() if groups else 32,
    )


def linear(layer: Any) -> Linear | None:
    """The kernel's view of a linear layer whose weights are all of the kernel's formats
    (None for any other layer: one LoRA wraps, say, which has no ``in_features``)."""
    found = weights(layer)
    if found is None:
        return None
    return linear_of(found, layer.in_features, getattr(layer, "bias", None))


def floats(*tensors: torch.Tensor | None) -> bool:
    """Whether every tensor given (None aside) is float32 and contiguous, as C reads it."""
    return all(t is None or (t.dtype == torch.float32 and t.is_contiguous()) for t in tensors)


def act(module: object) -> Act | None:
    """The kernel's code for a gated activation, or None for one it lacks (a subclass too:
    it may compute something else)."""
    if type(module) is SiluAndMul:
        return Act(0, 0.0, 0.0)
    if type(module) is GeluTanhAndMul:
        return Act(1, 0.0, 0.0)
    if isinstance(module, ClampedSwiGLU) and type(module) is ClampedSwiGLU:
        return Act(2, module.alpha, module.limit)
    return None


def same_layout(*linears: Linear) -> bool:
    """Whether the linears read one input layout: one quantization of a row serves all."""
    return len({(x.K, x.Kp, x.G) for x in linears}) == 1
