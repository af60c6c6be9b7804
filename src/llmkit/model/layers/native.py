"""Layers whose weights are a GGUF file's own blocks, in any format of
:mod:`llmkit.model.layers.weights.registry`: a linear layer stacked from parts of different formats
(a Q4_K_M file's q and k in Q4_K beside v in Q6_K), and a token embedding."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import nn

from llmkit.model.layers.weights.registry import Packed, WeightFormat


class Part(NamedTuple):
    """``out_features`` rows of a layer's output, from weight ``packed`` of ``format``."""

    format: WeightFormat
    packed: Packed
    out_features: int


class _Holder(nn.Module):
    """Keeps its parts' tensors as buffers (moved, counted and saved with the model) and the
    parts themselves as plain attributes, rebuilt whenever the buffers are replaced."""

    def _hold(self, parts: list[Part]) -> None:
        self._layout = [(p.format, p.out_features, _fields(p.packed)) for p in parts]
        for i, part in enumerate(parts):
            for j, tensor in enumerate(part.packed):
                if isinstance(tensor, torch.Tensor):
                    self.register_buffer(f"w{i}_{j}", tensor)
        self._rebuild()

    def _rebuild(self) -> None:
        self.parts = [
            Part(
                fmt, type_(*(getattr(self, f"w{i}_{j}") if f is None else f for j, f in fields)), n
            )
            for i, (fmt, n, (type_, fields)) in enumerate(self._layout)
        ]

    def _apply(self, fn: Any, recurse: bool = True) -> _Holder:
        super()._apply(fn, recurse)
        self._rebuild()
        return self


def _fields(packed: Packed) -> tuple[type, list[tuple[int, Any]]]:
    """The packed tuple's type and, per field, None (a tensor: a buffer) or its value."""
    return type(packed), [
        (j, None if isinstance(f, torch.Tensor) else f) for j, f in enumerate(packed)
    ]


class NativeLinear(_Holder):
    """``y = x W^T (+ b)``, ``W`` the rows of its parts stacked in order."""

    def __init__(
        self,
        parts: list[Part],
        in_features: int,
        out_features: int,
        bias: nn.Parameter | None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        """``bias``: the float layer's own parameter, with its weight loader; ``dtype``: the
        model's (what a LoRA on top computes in)."""
        super().__init__()
        self.in_features, self.out_features, self.dtype = in_features, out_features, dtype
        self.bias = bias
        self._hold(parts)

    @property
    def device(self) -> torch.device:
        return next(self.buffers()).device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, self.in_features)
        if len(self.parts) == 1:
            p = self.parts[0]
            out = p.format.linear(flat, p.packed, p.out_features)
        else:  # each part writes its columns of the stacked output
            out = flat.new_empty((flat.shape[0], self.out_features), dtype=torch.float32)
            column = 0
            for p in self.parts:
                p.format.linear(
                    flat, p.packed, p.out_features, out[:, column : column + p.out_features]
                )
                column += p.out_features
        out = out.to(x.dtype)
        if self.bias is not None:
            out += self.bias
        return out.reshape(*shape[:-1], self.out_features)

    def dequantized(self) -> torch.Tensor:
        """The weight ``[out, in]`` in float32, as the kernels see it."""
        return torch.cat(
            [
                p.format.dequantize(p.packed)[: p.out_features, : self.in_features]
                for p in self.parts
            ]
        )

    def extra_repr(self) -> str:
        kinds = "+".join(p.format.name for p in self.parts)
        return f"{self.in_features}, {self.out_features}, {kinds}"


class NativeEmbedding(_Holder):
    """A token embedding kept as the file's blocks, each row dequantized as it is looked up."""

    def __init__(self, part: Part, dim: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.dtype = part.out_features, dim, dtype
        self._hold([part])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        part = self.parts[0]
        found = part.format.rows(part.packed, ids.reshape(-1))[:, : self.embedding_dim]
        return found.to(self.dtype).view(*ids.shape, self.embedding_dim)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, {self.parts[0].format.name}"
