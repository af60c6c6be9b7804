"""A llama-family decode step's layers in one C call, where the layers' weights are native
formats on CPU.

At one stream SmolLM2's 30 layers spent ~6 ms a token in the torch ops and module calls
around their matmuls (~35 ops a layer on one row) against ~9 ms in the matmuls; the kernel
``llmkit/kernels/cpu/llama_decode.c`` runs every layer of a decode step in one OpenMP region
(see there). :class:`FusedDecode` decides per step whether it applies: one query row per
request, float32 or float16 KV caches on CPU, one rank, and every layer one the kernel reads
(its linears' weights in w4a8, q8, kq or mxfp4 formats: a GGUF's Q4_0/Q4_1/Q8_0/Q5_0/Q5_1/
Q4_K/Q5_K/Q6_K/MXFP4 in any mix, or ``quantization="w4a8"``/``"w8a8"``; float32 norms, q/k norms and
sandwich norms included; any attention spec; a dense MLP or a GGUF file's experts
(``llama_fused_moe.py``); no LoRA); else the model runs its layers as modules, as before.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.loader import load_function
from llmkit.model.context import ForwardContext
from llmkit.model.layers.moe import SparseMoE
from llmkit.model.layers.norm import RMSNorm
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
from llmkit.model.recurrent import StepStates


class LlamaStack(Protocol):
    """What the kernel reads of a :class:`llmkit.model.models.llama.LlamaModel` (named by
    shape, not imported: that module imports this one)."""

    layers: nn.ModuleList
    rotaries: nn.ModuleDict  # a layer's rotary table by its ``rope`` key
    norm: RMSNorm

    def run_layers(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor: ...


SOURCE = SOURCES / "llama_decode.c"
_MAX_HEAD_DIM = 512  # the kernel's RoPE scratch
_NORMS = ("norm1", "norm2", "attn_norm", "mlp_norm", "q_norm", "k_norm")


class _Layer(ctypes.Structure):
    _fields_ = [
        *((name, P) for name in (*_NORMS, "cos", "sin", "sinks")),
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


class _Model(ctypes.Structure):
    _fields_ = [
        *((name, I64) for name in ("layers", "hidden", "heads", "kv_heads", "head_dim")),
        *((name, I64) for name in ("block_size", "kv_half")),
        ("eps", F32),
        ("layer", ctypes.POINTER(_Layer)),
    ]


@functools.cache
def load() -> Callable[..., int] | None:
    """The compiled kernel, or None where it cannot be built here (no AVX2, no compiler)."""
    return load_function(SOURCE, "llama_decode", [P] * 6 + [I64] * 3 + [P] * 3)


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


def _layer(
    layer: Any, eps: float, attention: tuple[Any, int, Any] | None, states: Any
) -> tuple[_Layer, Moe | None, Gdn | None] | None:
    """A decoder layer's view for the kernel (and the views of its experts and its linear
    attention, which it points to), or None where it does not fit: its norms not float32 of
    one ``eps``, a weight of another format, an activation or rotary table the kernel lacks.
    ``attention``: an attention layer's (KV caches, KV cache group, rotary table);
    ``states``: a linear-attention layer's (convolution pool, state pool)."""
    attn: Any = getattr(layer, "self_attn", None)
    spec: Any = None if attn is None else attn.spec
    # In _NORMS' order. Sandwich norms: the attention's output normed, then the MLP's input
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
        return _Layer(
            *pointers, None, None, None, Linear(), Linear(), gate_up, down,
            None if experts is None else ctypes.pointer(experts), the_act,
            None, None, 0, 0, 0.0, 0.0, ctypes.pointer(mixer), 0, 0,
        ), experts, mixer  # fmt: skip
    (k_cache, v_cache), group, rotary = attention
    qkv, o = linear(attn.qkv_proj), linear(attn.o_proj)
    rotated = rotary.cos.shape[-1]
    if qkv is None or o is None or not floats(rotary.cos, rotary.sin) or rotated % 2:
        return None
    view = _Layer(
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


class _Plan:
    """The kernel's arguments that hold for every step on the same KV caches (and the
    structs their pointers reach, kept alive with them)."""

    def __init__(
        self, model: _Model, layers: ctypes.Array[_Layer], experts: list, kv_caches: list
    ) -> None:
        self.model, self.layers, self.experts, self.kv_caches = model, layers, experts, kv_caches
        self.mixers: list[Gdn | None] = []


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
            return self._run(plan, x.contiguous(), ctx)
        starts = meta.query_start_loc_host
        one = [i for i in range(meta.num_reqs) if starts[i + 1] - starts[i] == 1]
        if not one:
            return None
        out = torch.empty_like(x)
        decodes, rows = ctx.select(one)
        out[rows] = self._run(plan, x[rows], decodes)
        rest = [i for i in range(meta.num_reqs) if starts[i + 1] - starts[i] > 1]
        if rest:  # (a request with no rows this step needs nothing)
            other, rows = ctx.select(rest)
            out[rows] = model.run_layers(x[rows], other)
        return out

    def _run(self, plan: _Plan, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        """Every layer on decode rows ``x`` (contiguous, updated in place)."""
        kernel = load()
        assert kernel is not None  # a plan is made only where it loads
        meta = ctx.meta
        # Each KV cache group's slots and block tables, one after the other.
        slots, tables = ctx.group_tables()
        tables = tables.contiguous()
        status = kernel(
            ctypes.byref(plan.model),
            x.data_ptr(),
            ctx.positions.data_ptr(),
            slots.data_ptr(),
            tables.data_ptr(),
            meta.seq_lens.data_ptr(),
            x.shape[0],
            tables.shape[1],
            torch.get_num_threads(),
            *_state_rows(ctx.states),
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
        fits = _fits(ctx)
        self._plan = _make_plan(model, caches, ctx.cache_groups, ctx.states) if fits else None
        if self._plan is None:
            self._unfit = caches
        return self._plan


def _state_rows(states: StepStates | None) -> tuple[int | None, int | None, int | None]:
    """Each row's state slot and checkpoint (slot, save_at, save_slot): a hybrid's."""
    if states is None:
        return None, None, None
    at, slot = states.save_at, states.save_slot
    saves = (None, None) if at is None or slot is None else (at.data_ptr(), slot.data_ptr())
    return states.slots.data_ptr(), *saves


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


def _make_plan(
    model: LlamaStack, kv_caches: list, groups: tuple[int, ...], states: StepStates | None
) -> _Plan | None:
    """``groups``: each cache's KV cache group; ``states``: a hybrid's state pools."""
    decoders: list[Any] = list(model.layers)
    attns = [layer.self_attn for layer in decoders if hasattr(layer, "self_attn")]
    shapes = {(a.num_heads, a.num_kv_heads, a.head_dim) for a in attns}
    if len(shapes) != 1 or attns[0].head_dim > _MAX_HEAD_DIM:
        return None
    eps = decoders[0].input_layernorm.eps
    found = []
    for layer in decoders:
        mixer = getattr(layer, "linear_attn", None)
        if mixer is None:  # attention: its KV cache (as the model numbers them) and rope
            cache, rotary = layer.self_attn.layer_idx, model.rotaries[layer.self_attn.rope]
            found.append(_layer(layer, eps, (kv_caches[cache], groups[cache], rotary), None))
        elif states is not None:
            pools = (states.conv[mixer.state_index], states.recurrent[mixer.state_index])
            found.append(_layer(layer, eps, None, pools))
        else:
            return None
    views = [view for view in found if view is not None]
    if len(views) != len(decoders):
        return None
    array = (_Layer * len(views))(*(layer for layer, _, _ in views))
    first = attns[0]
    spec = _Model(
        len(views),
        model.norm.weight.shape[0],
        first.num_heads,
        first.num_kv_heads,
        first.head_dim,
        kv_caches[0][0].shape[1],
        kv_caches[0][0].dtype == torch.float16,
        eps,
        array,
    )
    plan = _Plan(spec, array, [experts for _, experts, _ in views], kv_caches)
    plan.mixers = [mixer for _, _, mixer in views]  # kept alive with the plan
    return plan
