"""The gated delta rule over a step's sequences: a small C kernel on CPU,
the torch reference elsewhere (CUDA, or no compiler) and for the tests.

``kernels/cpu/gated_delta.c`` runs each (sequence, value head) pair's recurrence with its
state in cache; :func:`gated_delta_torch` is the same arithmetic in torch ops, a token at a
time for every head of a sequence at once.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

import torch

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.loader import load_function

SOURCE = SOURCES / "gated_delta.c"
_I64, _P = ctypes.c_int64, ctypes.c_void_p


@functools.cache
def load() -> Callable[..., int] | None:
    """The compiled kernel, or None where it cannot be built or loaded here."""
    return load_function(SOURCE, "gated_delta_f32", [_P] * 11 + [_I64] * 9)


def gated_delta(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    states: torch.Tensor,
    slots: torch.Tensor,
    starts: torch.Tensor,
    save_at: torch.Tensor | None = None,
    save_slot: torch.Tensor | None = None,
) -> torch.Tensor:
    """The outputs ``[T, Hv, Dv]`` of every sequence's tokens, its state updated in place.

    ``q``, ``k`` ``[T, Hk, Dk]`` and ``v`` ``[T, Hv, Dv]`` (float32, rows at any stride,
    heads contiguous); ``g`` (log decay) and ``beta`` ``[T, Hv]``; ``states`` ``[slots, Hv,
    Dk, Dv]``; sequence ``b`` owns rows ``starts[b]`` to ``starts[b + 1]`` and state
    ``slots[b]``; after ``save_at[b]`` of its tokens (-1: never) its state is copied into
    ``save_slot[b]``. Value head ``h`` reads key head ``h // (Hv // Hk)``.
    """
    kernel = load() if states.is_cpu else None
    if kernel is None:
        return gated_delta_torch(q, k, v, g, beta, states, slots, starts, save_at, save_slot)
    _check(q, k, v, g, beta, states)
    out = torch.empty(v.shape, dtype=torch.float32)
    ints = [t.to(torch.int64).contiguous() for t in (slots, starts)]
    saves = [None if t is None else t.to(torch.int64).contiguous() for t in (save_at, save_slot)]
    status = kernel(
        q.data_ptr(),
        k.data_ptr(),
        v.data_ptr(),
        g.data_ptr(),
        beta.data_ptr(),
        states.data_ptr(),
        ints[0].data_ptr(),
        ints[1].data_ptr(),
        None if saves[0] is None else saves[0].data_ptr(),
        None if saves[1] is None else saves[1].data_ptr(),
        out.data_ptr(),
        slots.shape[0],
        q.shape[1],
        v.shape[1],
        q.shape[2],
        v.shape[2],
        q.stride(0),
        k.stride(0),
        v.stride(0),
        torch.get_num_threads(),
    )
    if status != 0:
        raise ValueError("the gated delta kernel takes head sizes up to 512, Hv a multiple of Hk")
    return out


def _check(*tensors: torch.Tensor) -> None:
    q, k, v, g, beta, states = tensors
    if not all(t.dtype == torch.float32 and t.is_cpu for t in tensors):
        raise ValueError("gated_delta takes float32 CPU tensors")
    if not all(t.stride(-1) == 1 and t.stride(-2) == t.shape[-1] for t in (q, k, v)):
        raise ValueError("gated_delta takes q, k, v with each row's heads contiguous")
    if not (g.is_contiguous() and beta.is_contiguous() and states.is_contiguous()):
        raise ValueError("gated_delta takes contiguous g, beta and states")


def gated_delta_torch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    states: torch.Tensor,
    slots: torch.Tensor,
    starts: torch.Tensor,
    save_at: torch.Tensor | None = None,
    save_slot: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`gated_delta` in torch ops (any device)."""
    per_key = v.shape[1] // q.shape[1]
    qn = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * q.shape[-1] ** -0.5
    kn = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    qn, kn = qn.repeat_interleave(per_key, dim=1), kn.repeat_interleave(per_key, dim=1)
    out = torch.empty(v.shape, dtype=torch.float32, device=v.device)
    bounds = starts.tolist()
    ats = [-1] * len(bounds) if save_at is None else save_at.tolist()
    for b, slot in enumerate(slots.tolist()):
        s = states[slot].clone()
        for t in range(bounds[b], bounds[b + 1] + 1):
            if t - bounds[b] == ats[b]:
                assert save_slot is not None
                states[int(save_slot[b])] = s
            if t == bounds[b + 1]:
                break
            s = s * g[t].exp()[:, None, None]
            delta = (v[t] - (s * kn[t][:, :, None]).sum(1)) * beta[t][:, None]
            s = s + kn[t][:, :, None] * delta[:, None, :]
            out[t] = (s * qn[t][:, :, None]).sum(1)
        states[slot] = s
    return out
