"""What the weight-kernel registry asks of a kernel's Python module: its ``KERNEL``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

Packed = Any  # a kernel's own NamedTuple of tensors: what its C code reads


class Fused(NamedTuple):
    """A packed weight as the fused decode step's ``Part`` reads it: its tensors in the
    Part's field order (``w, hi, scale, min, d, dmin``; None where it has none), its layout's
    number in its kernel, its padded input count and its group (None: the kernel reads no
    group sums)."""

    tensors: list[torch.Tensor | None]
    layout: int
    padded_inputs: int
    group: int | None


@dataclass(frozen=True)
class Kernel:
    """A C kernel's Python side (``weights/<name>.py`` over ``kernels/cpu/<name>.c``).

    - ``read(type, blocks, in_features)``: a GGUF type's rows (uint8 ``[out, in / block *
      bytes]``) in the kernel's layout, the same numbers;
    - ``linear(x, packed, out_features)``: float32 ``x [M, K]`` times the weight's transpose;
    - ``dequantize(packed)``: the padded weight ``[Np, Kp]`` in float32, as the kernel sees it;
    - ``load()``: the compiled kernel, or None where none can be had (``linear`` then runs
      the same math in torch);
    - ``fused``: the fused decode step's view (None: ``fused_linear.h``'s ``part_tiles`` has
      no case for the kernel, and a layer holding it runs through the modules);
    - ``quantize(weight, group_size)``: a float weight into the kernel's layout, for a
      ``quantization=`` method that is one of its formats (None: no method is);
    - ``rows(packed, ids)``: float32 rows of the padded weight, where the kernel reads
      single rows cheaper than whole tiles (an embedding lookup)."""

    name: str
    packed: type
    read: Callable[[str, torch.Tensor, int], Packed]
    linear: Callable[[torch.Tensor, Packed, int], torch.Tensor]
    dequantize: Callable[[Packed], torch.Tensor]
    load: Callable[[], Any]
    fused: Callable[[Packed], Fused] | None = None
    quantize: Callable[[torch.Tensor, int], Packed] | None = None
    rows: Callable[[Packed, torch.Tensor], torch.Tensor] | None = None
