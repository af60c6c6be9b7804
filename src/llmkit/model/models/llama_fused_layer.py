"""The fused decode kernel's view of one decoder layer (``kernels/cpu/llama_decode.c``'s
``Layer``): its norms, linears, MLP or experts, attention spec and KV cache, or its linear
attention; None where a layer does not fit the kernel."""

from __future__ import annotations

import ctypes
from typing import Any

from llmkit.model.layers.moe import SparseMoE
from llmkit.model.models.llama_fused_gdn import Gdn, gdn
from llmkit.model.models.llama_fused_moe import Moe, moe
from llmkit.model.models.llama_fused_view import (
    F32,
    I64,
    Act,
    Linear,
    P,
    act,
    floats,
    linear,
    pointer,
)

NORMS = ("norm1", "norm2", "attn_norm", "mlp_norm", "q_norm", "k_norm")


class Layer(ctypes.Structure):
    _fields_ = [
        *((name, P) for name in (*NORMS, "cos", "sin", "sinks")),
        *((name, Linear) for name in ("qkv", "o", "gate_up", "down")),
        ("moe", ctypes.POINTER(Moe)),
        ("act", Act),
        ("k_cache", P),
        ("v_cache", P),
        ("window", I64),
        ("group", I64),
        ("scale", F32),
        ("softcap", F32),
        ("gdn", ctypes.POINTER(Gdn)),
        ("rotary", I64),
        ("gated", I64),
    ]


class Model(ctypes.Structure):
    _fields_ = [
        *((name, I64) for name in ("layers", "hidden", "heads", "kv_heads", "head_dim")),
        *((name, I64) for name in ("block_size", "kv_half")),
        ("eps", F32),
        ("layer", ctypes.POINTER(Layer)),
    ]


def _mlp(mlp: Any) -> tuple[Linear, Linear, Act, Moe | None] | None:
    """A layer's MLP for the kernel: a dense one's gate/up, down and activation, or a
    mixture of experts; None where it does not fit."""
    if isinstance(mlp, SparseMoE):
        found = moe(mlp)
        return None if found is None else (Linear(), Linear(), Act(), found)
    gate_up, down, the_act = linear(mlp.gate_up_proj), linear(mlp.down_proj), act(mlp.act)
    if gate_up is None or down is None or the_act is None:
        return None
    return gate_up, down, the_act, None


def layer_view(
    layer: Any, eps: float, attention: tuple[Any, int, Any] | None, states: Any
) -> tuple[Layer, Moe | None, Gdn | None] | None:
    """A decoder layer's view for the kernel (and the views of its experts and its linear
    attention, which it points to), or None where it does not fit: its norms not float32 of
    one ``eps``, a weight of another format, an activation or rotary table the kernel lacks.
    ``attention``: an attention layer's (KV caches, KV cache group, rotary table);
    ``states``: a linear-attention layer's (convolution pool, state pool)."""
    attn: Any = getattr(layer, "self_attn", None)
    spec: Any = None if attn is None else attn.spec
    # In NORMS' order. Sandwich norms: the attention's output normed, then the MLP's input
    # and output.
    norms: list[Any] = [layer.input_layernorm, layer.post_attention_layernorm, None, None]
    if getattr(layer, "sandwich", False):
        norms[1:] = [layer.pre_feedforward_layernorm, norms[1], layer.post_feedforward_layernorm]
    norms += [None, None] if attn is None else [attn.q_norm, attn.k_norm]
    weights = [n.weight for n in norms if n is not None]
    sinks = None if spec is None else spec.sinks
    if any(n.eps != eps for n in norms if n is not None) or not floats(*weights, sinks):
        return None
    mlp = _mlp(layer.mlp)
    if mlp is None:
        return None
    gate_up, down, the_act, experts = mlp
    pointers = [None if n is None else n.weight.data_ptr() for n in norms]
    if attention is None:  # Gated DeltaNet
        mixer = gdn(layer.linear_attn, *states)
        if mixer is None:
            return None
        return Layer(
            *pointers, None, None, None, Linear(), Linear(), gate_up, down,
            None if experts is None else ctypes.pointer(experts), the_act,
            None, None, 0, 0, 0.0, 0.0, ctypes.pointer(mixer), 0, 0,
        ), experts, mixer  # fmt: skip
    (k_cache, v_cache), group, rotary = attention
    qkv, o = linear(attn.qkv_proj), linear(attn.o_proj)
    rotated = rotary.cos.shape[-1]
    if qkv is None or o is None or not floats(rotary.cos, rotary.sin) or rotated % 2:
        return None
    view = Layer(
        *pointers,
        rotary.cos.data_ptr(),
        rotary.sin.data_ptr(),
        pointer(sinks),
        qkv,
        o,
        gate_up,
        down,
        None if experts is None else ctypes.pointer(experts),
        the_act,
        k_cache.data_ptr(),
        v_cache.data_ptr(),
        spec.window or 0,
        group,
        spec.scale,
        spec.softcap or 0.0,
        None,
        rotated,
        int(getattr(attn, "gated", False)),
    )
    return view, experts, None
