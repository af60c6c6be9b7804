"""What the fused decode kernel reads of a Gated DeltaNet layer (``kernels/cpu/gdn_step.h``):
its in- and out-projections in the kernel's formats, the convolution's taps, the decay's
parameters, the gated norm, and the state pools its rows' slots index."""

from __future__ import annotations

import ctypes
from typing import Any

import torch

from llmkit.model.models.llama_fused_view import I64, Linear, P, floats, linear, pointer


class Gdn(ctypes.Structure):
    _fields_ = [
        ("in_proj", Linear),
        ("out", Linear),
        *((name, P) for name in ("conv", "A_log", "dt_bias", "norm", "conv_states", "states")),
        ("to_grouped", P),
        *((name, I64) for name in ("hk", "hv", "dk", "dv", "kernel")),
    ]


def gdn(layer: Any, conv_states: torch.Tensor, states: torch.Tensor) -> Gdn | None:
    """The kernel's view of ``layer`` (a ``GatedDeltaNet``) on its state pools; None where its
    projections are not of the kernel's formats."""
    in_proj, out = linear(layer.in_proj), linear(layer.out_proj)
    tensors = (layer.conv1d.weight, layer.A_log, layer.dt_bias, layer.norm.weight)
    if in_proj is None or out is None or not floats(*tensors, conv_states, states):
        return None
    order = layer.to_grouped
    return Gdn(
        in_proj,
        out,
        *(pointer(t) for t in (*tensors, conv_states, states)),
        None if order is None else pointer(order),
        layer.hk,
        layer.hv,
        layer.dk,
        layer.dv,
        layer.kernel,
    )
