"""What the weight-kernel registry asks of a kernel's Python module (its ``KERNEL``), and what
every kernel shares: the activations' int8 quantization, loading its C file and calling its
matmul, or the same math in torch where no kernel can be had."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.loader import instruction_path, load_function

Packed = Any  # a kernel's own NamedTuple of tensors: what its C code reads
TILE = 8  # output columns a kernel's pass produces (one 32-bit lane each): every kernel's
BLOCK = 32  # the activations' block: inputs whose int8 codes share a scale
_I64, _P = ctypes.c_int64, ctypes.c_void_p


class Fused(NamedTuple):
    """A packed weight as the fused decode step's ``Part`` reads it: its tensors in the
    Part's field order (``w, hi, scale, min, d, dmin``; None where it has none), its layout's
    number in its kernel, its padded input count, its group (None: the kernel reads no
    group sums) and whether it reads the input's integer code sums per 16 (an offset's term:
    MXFP4's values, Q6_K's unsigned codes)."""

    tensors: list[torch.Tensor | None]
    layout: int
    padded_inputs: int
    group: int | None
    code_sums: bool = False


class Call(NamedTuple):
    """What a kernel's ``<name>_linear`` reads of a packed weight: its tensors (in the C
    signature's order; an empty one is passed as NULL), its padded input count and the
    integers the signature has after the output count (w4a8's group, kq's layout)."""

    tensors: Sequence[torch.Tensor]
    padded_inputs: int
    extra: tuple[int, ...] = ()


@dataclass(frozen=True)
class Kernel:
    """A C kernel's Python side (``weights/<name>.py`` over ``kernels/cpu/<name>.c``, whose
    ``<name>_linear(x, tensors..., out, rows, k, kp, n, ldo, extra..., threads)`` multiplies and
    whose ``<name>_path()`` names the instructions it multiplies with).

    - ``read(type, blocks, in_features)``: a GGUF type's rows (uint8 ``[out, in / block *
      bytes]``) in the kernel's layout, the same numbers;
    - ``dequantize(packed)``: the padded weight ``[Np, Kp]`` in float32, as the kernel sees it;
    - ``call(packed)``: the weight's arguments to ``<name>_linear``; ``tensors`` and
      ``extra``: how many of each the signature has;
    - ``fused``: the fused decode step's view (None: ``fused_linear.h``'s ``part_tiles`` has
      no case for the kernel, and a layer holding it runs through the modules);
    - ``quantize(weight, group_size)``: a float weight into the kernel's layout, for a
      ``quantization=`` method that is one of its formats (None: no method is);
    - ``rows(packed, ids)``: float32 rows of the padded weight, where the kernel reads
      single rows cheaper than whole tiles (an embedding lookup)."""

    name: str
    packed: type
    read: Callable[[str, torch.Tensor, int], Packed]
    dequantize: Callable[[Packed], torch.Tensor]
    call: Callable[[Packed], Call]
    tensors: int
    extra: int = 0
    fused: Callable[[Packed], Fused] | None = None
    quantize: Callable[[torch.Tensor, int], Packed] | None = None
    rows: Callable[[Packed, torch.Tensor], torch.Tensor] | None = None

    @property
    def source(self) -> Path:
        """The kernel's C file."""
        return SOURCES / f"{self.name}.c"

    @functools.cache  # noqa: B019 (a kernel lives as long as the process)
    def load(self, variant: str | None = None) -> Callable[..., int] | None:
        """The compiled matmul (for ``variant``, by default this CPU's widest), or None
        where it cannot be had here (:meth:`linear` then runs the same math in torch)."""
        argtypes = [_P] * (self.tensors + 2) + [_I64] * (6 + self.extra)
        return load_function(self.source, f"{self.name}_linear", argtypes, variant)

    def path(self, variant: str | None = None) -> str | None:
        """The instructions the build for ``variant`` multiplies with, or None."""
        return instruction_path(self.source, f"{self.name}_path", variant)

    def linear(
        self,
        x: torch.Tensor,
        packed: Packed,
        out_features: int,
        kernel: Callable[..., int] | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``x`` ``[M, K]`` times the packed weight's transpose: float32 ``[M, out_features]``,
        written into ``out`` where given (float32, unit column stride: a part's columns of a
        stacked layer's output). ``kernel``: a build of :meth:`load` (default: this
        machine's widest)."""
        x = x.float().contiguous()
        rows, k = x.shape
        kernel = kernel or self.load()
        if kernel is None:
            product = self.linear_in_torch(x, packed, out_features)
            return product if out is None else out.copy_(product)
        if out is None:
            out = x.new_empty((rows, out_features))
        elif out.shape != (rows, out_features) or out.dtype != torch.float32 or out.stride(1) != 1:
            raise ValueError(
                f"out must be float32 [{rows}, {out_features}] with unit column stride"
            )
        call = self.call(packed)
        status = kernel(
            x.data_ptr(),
            *(t.data_ptr() if t.numel() else None for t in call.tensors),
            out.data_ptr(),
            rows,
            k,
            call.padded_inputs,
            out_features,
            out.stride(0),
            *call.extra,
            torch.get_num_threads(),
        )
        if status != 0:
            raise MemoryError(f"the {self.name} kernel ran out of memory")
        return out

    def linear_in_torch(self, x: torch.Tensor, packed: Packed, out_features: int) -> torch.Tensor:
        """:meth:`linear`'s math in torch ops, where no kernel can be built: activation codes
        times the dequantized weight, equal to the kernel's numbers up to float rounding."""
        codes, scale = quantize_activations(x.float())
        return F.linear(codes * scale, self.dequantize(packed)[:out_features, : x.shape[1]])


def quantize_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 ``x`` ``[M, K]`` as s8 codes (held in float32) and each one's scale, that of
    its block of 32 inputs of its row (both ``[M, K]``): the same float operations as the
    kernels', so the same codes (llama.cpp's q8 blocks: every format's layers of a model
    share one quantized input)."""
    rows, k = x.shape
    blocks = F.pad(x, (0, -k % BLOCK)).view(rows, -1, BLOCK)
    peak = blocks.abs().amax(dim=-1, keepdim=True)
    # An elementwise division, as the kernel's 127.f / peak: torch divides a scalar by a
    # tensor through a reciprocal, off by an ulp in a quarter of cases, which moves a code
    # that sits on a .5 boundary.
    inv = torch.where(peak > 0, torch.full_like(peak, 127.0) / peak, 0.0)
    codes = torch.round(blocks * inv).clamp_(-127, 127)
    scale = (peak / 127.0).expand_as(blocks)
    return codes.reshape(rows, -1)[:, :k], scale.reshape(rows, -1)[:, :k]
