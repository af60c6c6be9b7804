"""What the fused decode kernel reads of a mixture of experts (``kernels/cpu/fused_moe.h``):
the router, the routing rule, the experts' stacked GGUF weights as expert 0's view with the
step from one expert's fields to the next's, their biases and activation, and the shared
expert with its gate."""

from __future__ import annotations

import ctypes
from typing import Any

from llmkit.model.layers.moe import NativeExperts, Routing, SparseMoE
from llmkit.model.layers.weights.kernel import TILE
from llmkit.model.layers.weights.registry import fused_view
from llmkit.model.models.llama_fused_view import (
    FIELDS,
    I64,
    Act,
    Linear,
    P,
    act,
    floats,
    linear,
    linear_of,
    pointer,
    same_layout,
)

_Steps = (I64 * len(FIELDS)) * 3


class Moe(ctypes.Structure):
    _fields_ = [
        ("gate_up", Linear),  # expert 0's gate rows and up rows
        ("down", Linear),
        ("step", _Steps),  # bytes from an expert's fields to the next's: gate, up, down
        *((name, P) for name in ("router", "router_bias", "b13", "b2")),
        ("shared_gate_up", Linear),
        ("shared_down", Linear),  # no parts: no shared expert
        ("shared_gate", P),
        *((name, I64) for name in ("experts", "top_k", "scoring", "renormalize", "after_top_k")),
        ("act", Act),
        ("shared_act", Act),
    ]


def _steps(packed: Any, rows: int) -> ctypes.Array[ctypes.c_int64] | None:
    """Bytes from one expert's ``rows`` rows (whole tiles) to the next's, per field of a
    stacked weight; None where a field is not one dense array of tiles."""
    found = fused_view(packed)
    if found is None:
        return None
    tensors = found[1].tensors
    if any(t is not None and t.numel() and not t.is_contiguous() for t in tensors):
        return None
    return (I64 * len(FIELDS))(
        *(
            0 if t is None or not t.numel() else t.stride(0) * t.element_size() * rows // TILE
            for t in tensors
        )
    )


def _shared(mlp: SparseMoE) -> tuple[Linear, Linear, Act] | None:
    """The shared expert's gate/up, down and activation (no parts: none); None where it
    does not fit."""
    if mlp.shared_expert is None:
        return Linear(), Linear(), Act()
    shared: Any = mlp.shared_expert
    gate_up, down, the_act = linear(shared.gate_up_proj), linear(shared.down_proj), act(shared.act)
    if gate_up is None or down is None or the_act is None:
        return None
    return gate_up, down, the_act


def moe(mlp: SparseMoE) -> Moe | None:
    """The kernel's view of a mixture of experts whose experts are a GGUF file's blocks of the
    kernel's formats, float32 router and biases; None for any other."""
    experts, routing = mlp.experts, mlp.routing
    if not isinstance(experts, NativeExperts) or type(routing) is not Routing:
        return None
    hidden, inter = experts.hidden, experts.inter
    projections = (experts.gate, experts.up, experts.down)
    if any(len(p.parts) != 1 for p in projections):
        return None
    (gate,), (up,), (down,) = (p.parts for p in projections)
    gate_up = linear_of([(gate.packed, inter), (up.packed, inter)], hidden, None)
    down_view = linear_of([(down.packed, hidden)], inter, None)
    steps = [_steps(p.packed, rows) for p, rows in ((gate, inter), (up, inter), (down, hidden))]
    gate_weight = None if mlp.shared_expert_gate is None else mlp.shared_expert_gate.weight
    tensors = (mlp.gate.weight, mlp.gate.bias, experts.b13, experts.b2)
    shared, expert_act = _shared(mlp), act(experts.act)
    if gate_up is None or down_view is None or shared is None or expert_act is None:
        return None
    if any(step is None for step in steps) or not floats(*tensors, gate_weight):
        return None
    if shared[1].parts and not same_layout(gate_up, shared[0]):
        return None  # the rows are quantized once for the experts and the shared expert
    if shared[1].parts and shared[0].sums:
        gate_up.sums = 1  # the rows' code sums, made as they are quantized for the experts
    return Moe(
        gate_up,
        down_view,
        _Steps(*(step for step in steps if step is not None)),
        *(pointer(t) for t in tensors),
        shared[0],
        shared[1],
        pointer(gate_weight),
        experts.num_experts,
        routing.top_k,
        routing.scoring == "sigmoid",
        routing.renormalize,
        routing.softmax_after_top_k,
        expert_act,
        shared[2],
    )
