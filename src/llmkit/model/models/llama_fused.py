"""A llama-family step's layers in one C call, where the layers' weights are native formats
on CPU.

At one stream SmolLM2's 30 layers spent ~6 ms a token in the torch ops and module calls
around their matmuls (~35 ops a layer on one row) against ~9 ms in the matmuls; the kernel
``llmkit/kernels/cpu/llama_decode.c`` runs every layer of a step in one OpenMP region (see
there). :class:`FusedDecode` decides per step whether it applies: float32 or float16 KV
caches on CPU, one rank, and every layer one the kernel reads (``llama_fused_layer.py``: its
linears' weights in the weight-kernel registry's formats, a GGUF's in any mix or
``quantization="w4a8"``/``"w8a8"``; float32 norms, q/k norms and sandwich norms included; any
attention spec; a dense MLP or a GGUF file's experts; no LoRA); and per request: a decode
row, or a prompt chunk of a short context (:data:`PREFILL_CONTEXT`). The rest runs its layers
as modules, each mixture of experts' block still one C call (``moe_block``: the routing, the
experts grouped by row and the shared expert, as in the step; a prompt's 64 experts a layer
otherwise cost ~10 module calls each).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import torch
from torch import nn

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.loader import load_function
from llmkit.model.context import ForwardContext
from llmkit.model.layers.moe import SparseMoE
from llmkit.model.layers.norm import RMSNorm
from llmkit.model.models.llama_fused_gdn import Gdn
from llmkit.model.models.llama_fused_layer import Layer, Model, layer_view
from llmkit.model.models.llama_fused_moe import Moe
from llmkit.model.models.llama_fused_view import I64, P
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
# A prompt chunk's longest context that the kernel runs: its rows attend one by one over the
# cache, which beats the modules' batched attention only while the context is short (the
# layers' other work then weighs most, and runs in one call). Measured, SmolLM2 Q8_0, one
# prompt, 2 threads, modules against kernel: 32 tokens 211-227 vs 369-378 tok/s, 128 tokens
# 323-410 vs 340-367, 512 tokens 314-415 vs 289-299.
PREFILL_CONTEXT = 128


@functools.cache
def load() -> Callable[..., int] | None:
    """The compiled kernel, or None where it cannot be built here (no AVX2, no compiler)."""
    return load_function(SOURCE, "llama_decode", [P] * 6 + [I64] * 3 + [P] * 3)


@functools.cache
def load_block() -> Callable[..., int] | None:
    """The kernel's mixture-of-experts block alone, or None where it cannot be built."""
    return load_function(SOURCE, "moe_block", [P] * 3 + [I64] * 2)


def moe_block(view: Moe, x: torch.Tensor) -> torch.Tensor:
    """A mixture of experts' block (``view``, its weights' structs) on rows ``x``
    ``[T, hidden]`` float32 in one call."""
    kernel = load_block()
    assert kernel is not None  # a plan is made only where the library loads
    x = x.contiguous()
    out = torch.empty_like(x)
    status = kernel(
        ctypes.byref(view), x.data_ptr(), out.data_ptr(), x.shape[0], torch.get_num_threads()
    )
    if status != 0:
        raise MemoryError("the mixture-of-experts kernel ran out of memory")
    return out


class _Plan:
    """The kernel's arguments that hold for every step on the same KV caches (and the
    structs their pointers reach, kept alive with them)."""

    def __init__(
        self, model: Model, layers: ctypes.Array[Layer], experts: list, kv_caches: list
    ) -> None:
        self.model, self.layers, self.experts, self.kv_caches = model, layers, experts, kv_caches
        self.mixers: list[Gdn | None] = []
        self.blocks: list[tuple[SparseMoE, Moe]] = []  # each expert layer's module and view

    @contextmanager
    def moe_blocks(self) -> Iterator[None]:
        """While open, the expert layers' modules run their blocks in one call each."""
        for mlp, view in self.blocks:
            mlp.block = functools.partial(moe_block, view)
        try:
            yield
        finally:
            for mlp, _ in self.blocks:
                mlp.block = None


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

        A chunk of a prompt goes to the kernel too while its context is short (each of its
        rows attends as a decode row over the cache, its own keys written first): up to
        :data:`PREFILL_CONTEXT` tokens, where that costs less than the modules' batched
        attention; a longer one, and a hybrid's (its recurrent rows are sequential), goes
        through the modules, run here with :meth:`_Plan.moe_blocks` open. Which way a
        request goes depends on it alone, so its numbers never depend on what else shares
        its step (its greedy tokens neither).
        """
        meta = ctx.meta
        if not self.enabled or x.dtype != torch.float32:
            return None
        plan = self._plan_for(model, ctx)
        if plan is None:
            return None
        starts, lens = meta.query_start_loc_host, meta.seq_lens_host
        reqs = range(meta.num_reqs)
        here = [i for i in reqs if starts[i + 1] - starts[i] == 1 or self._prefills(ctx, lens[i])]
        if len(here) == meta.num_reqs:
            return self._run(plan, x.contiguous(), ctx)
        if not here:
            with plan.moe_blocks():
                return model.run_layers(x, ctx)
        out = torch.empty_like(x)
        fused, rows = ctx.select(here)
        out[rows] = self._run(plan, x[rows], fused)
        rest = [i for i in reqs if i not in here and starts[i + 1] > starts[i]]
        if rest:  # (a request with no rows this step needs nothing)
            other, rows = ctx.select(rest)
            with plan.moe_blocks():
                out[rows] = model.run_layers(x[rows], other)
        return out

    @staticmethod
    def _prefills(ctx: ForwardContext, seq_len: int) -> bool:
        """Whether a chunk of ``seq_len`` tokens of context runs in the kernel."""
        return ctx.states is None and seq_len <= PREFILL_CONTEXT

    def _run(self, plan: _Plan, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        """Every layer on rows ``x`` (contiguous, updated in place)."""
        kernel = load()
        assert kernel is not None  # a plan is made only where it loads
        meta = ctx.meta
        # Each KV cache group's slots and block tables, one after the other; the kernel
        # reads a table and a context length a row (a chunk's row i sees its first i keys).
        slots, tables = ctx.group_tables()
        seq_lens = meta.seq_lens
        if x.shape[0] != meta.num_reqs:
            starts = torch.as_tensor(meta.query_start_loc_host)
            owner = torch.repeat_interleave(torch.arange(meta.num_reqs), starts.diff())
            tables = torch.cat([m.block_tables[owner] for m in ctx.metas])
            seq_lens = (ctx.positions + 1).to(torch.int32)
        tables = tables.contiguous()
        status = kernel(
            ctypes.byref(plan.model),
            x.data_ptr(),
            ctx.positions.data_ptr(),
            slots.data_ptr(),
            tables.data_ptr(),
            seq_lens.data_ptr(),
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
            found.append(layer_view(layer, eps, (kv_caches[cache], groups[cache], rotary), None))
        elif states is not None:
            pools = (states.conv[mixer.state_index], states.recurrent[mixer.state_index])
            found.append(layer_view(layer, eps, None, pools))
        else:
            return None
    views = [view for view in found if view is not None]
    if len(views) != len(decoders):
        return None
    array = (Layer * len(views))(*(layer for layer, _, _ in views))
    first = attns[0]
    spec = Model(
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
    blocks = [(layer.mlp, experts) for layer, (_, experts, _) in zip(decoders, views)]
    plan.blocks = [(mlp, experts) for mlp, experts in blocks if experts is not None]
    return plan
