"""The weight formats that run as they are held, each bound to its kernel: a GGUF file's types
(:data:`FORMATS`) and the ``quantization=`` methods that are one of a kernel's formats
(:data:`METHODS`). The loader (which tensors load natively), the native layers (which
kernel multiplies) and the fused decode step (a part's kernel and layout) ask it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch

from llmkit.model.layers.weights import table
from llmkit.model.layers.weights.kernel import TILE, Fused, Kernel, Packed


@dataclass(frozen=True)
class WeightFormat:
    """A weight format (``spec``: the table's facts) and the kernel that multiplies it."""

    spec: table.Format
    kernel: Kernel

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.spec.block_bytes / self.spec.block_inputs

    def read(self, blocks: torch.Tensor, in_features: int) -> Packed:
        """The file's rows (uint8 ``[out, in / block_inputs * block_bytes]``) for the kernel."""
        return self.kernel.read(self.name, blocks, in_features)

    def linear(
        self, x: torch.Tensor, packed: Packed, out_features: int, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``x`` ``[M, K]`` float32 times the weight's transpose: ``[M, out_features]`` (into
        ``out``'s columns where given)."""
        return self.kernel.linear(x, packed, out_features, out=out)

    def dequantize(self, packed: Packed) -> torch.Tensor:
        """The padded weight ``[Np, Kp]`` in float32, as the kernel sees it."""
        return self.kernel.dequantize(packed)

    def rows(self, packed: Packed, ids: torch.Tensor) -> torch.Tensor:
        """Float32 rows ``ids`` (1-D) of the padded weight: an embedding lookup that
        dequantizes only the rows (or, by default, the tiles of 8 rows) it reads."""
        if self.kernel.rows is not None:
            return self.kernel.rows(packed, ids)
        tiles, at = torch.unique(ids // TILE, return_inverse=True)
        taken = type(packed)(*(_take(t, tiles) for t in packed))
        return self.kernel.dequantize(taken)[at * TILE + ids % TILE]


def _take(t: object, tiles: torch.Tensor) -> object:
    """A packed field's tiles ``tiles`` (every table is ``[tiles, ...]``; a name passes)."""
    return t.index_select(0, tiles) if isinstance(t, torch.Tensor) and t.numel() else t


def _kernel(name: str) -> Kernel:
    """Kernel ``name``'s ``KERNEL``, from its module beside this one."""
    kernel = importlib.import_module(f"{__package__}.{name}").KERNEL
    assert isinstance(kernel, Kernel) and kernel.name == name
    return kernel


KERNELS = {name: _kernel(name) for name in table.KERNELS}
FORMATS = {f.name: WeightFormat(f, KERNELS[f.kernel]) for f in table.FORMATS}
METHODS = {method: FORMATS[name] for method, name in table.METHODS.items()}
_BY_PACKED = {kernel.packed: kernel for kernel in KERNELS.values()}


def fused_view(packed: Packed) -> tuple[int, Fused] | None:
    """A packed weight's kernel number (the fused step's ``Part.kind``) and its view for
    the fused step; None for a weight no kernel of the registry holds, or whose kernel
    the step has no case for."""
    kernel = _BY_PACKED.get(type(packed))
    if kernel is None or kernel.fused is None:
        return None
    return table.KERNELS.index(kernel.name), kernel.fused(packed)
