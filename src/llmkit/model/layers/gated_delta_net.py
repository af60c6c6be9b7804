"""Gated DeltaNet (Qwen3.5, Qwen3-Next): linear attention with a fixed-size state per sequence.

Each token's projections go through a short causal convolution over the sequence (its last
``kernel - 1`` inputs kept per slot), then a delta rule updates a ``[key dim, value dim]``
matrix per value head: decayed by ``exp(g)``, corrected toward the token's value by ``beta``,
and read by the query. The output is RMS-normed per head, gated by ``silu(z)`` and projected
back. A step's sequences read and write their slots in the pool (``model/recurrent.py``).

A GGUF file lists the value heads *tiled* (``k0 k1 .. k0 k1 ..``: llama.cpp's converter
reorders them so that ggml broadcasts the key heads) where HF groups them by key head; the
layer keeps the file's order in its weights and reorders the heads around the delta rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from llmkit.model.context import ForwardContext
from llmkit.model.layers.gated_delta_cpu import gated_delta
from llmkit.model.layers.parallel_linear import RowParallelLinear, merged_column_parallel
from llmkit.model.parallel import SINGLE
from llmkit.model.recurrent import StateShape, StepStates

if TYPE_CHECKING:
    from transformers import PretrainedConfig


class _Weight(nn.Module):
    """A module that is one weight (the checkpoint's ``conv1d`` and ``norm``)."""

    def __init__(self, *shape: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(*shape))


class GatedDeltaNet(nn.Module):
    """One linear-attention layer; ``state_index``: its place among the model's state pools."""

    to_grouped: torch.Tensor | None  # a GGUF file's value heads -> HF's order, and back
    to_file: torch.Tensor | None

    def __init__(self, cfg: PretrainedConfig, state_index: int) -> None:
        super().__init__()
        self.state_index = state_index
        self.hk, self.hv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        self.dk, self.dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        self.key_dim, self.value_dim = self.hk * self.dk, self.hv * self.dv
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.kernel = cfg.linear_conv_kernel_dim
        hidden = cfg.hidden_size
        # q, k, v (the convolution's channels), then z, b and a in one matmul.
        sizes = [self.conv_dim, self.value_dim, self.hv, self.hv]
        self.in_proj = merged_column_parallel(hidden, sizes, False, SINGLE)
        self.conv1d = _Weight(self.conv_dim, self.kernel)
        self.dt_bias = nn.Parameter(torch.empty(self.hv))
        self.A_log = nn.Parameter(torch.empty(self.hv))
        self.norm = _Weight(self.dv)
        self.eps = cfg.rms_norm_eps
        self.out_proj = RowParallelLinear(self.value_dim, hidden, False, SINGLE)
        # Grouped value head i of key head j is the file's tiled head (i * hk + j).
        r = self.hv // self.hk
        tiled = torch.tensor([(h % r) * self.hk + h // r for h in range(self.hv)])
        in_file = bool(getattr(cfg, "linear_value_heads_tiled", False))
        self.register_buffer("to_grouped", tiled if in_file else None, persistent=False)
        self.register_buffer("to_file", tiled.argsort() if in_file else None, persistent=False)

    @property
    def state_shape(self) -> StateShape:
        return StateShape((self.kernel - 1, self.conv_dim), (self.hv, self.dk, self.dv))

    def forward(self, x: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        states = ctx.states
        assert states is not None, "a linear-attention layer runs with the step's state slots"
        qkv, z, b, a = self.in_proj(x).split(
            [self.conv_dim, self.value_dim, self.hv, self.hv], dim=-1
        )
        starts = ctx.meta.query_start_loc_host
        mixed = F.silu(self._conv(qkv, states, starts))
        q, k, v = mixed.split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        rows = x.shape[0]
        v = v.reshape(rows, self.hv, self.dv)
        beta = b.float().sigmoid()
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias.float())
        if self.to_grouped is not None:
            v, beta, g = v[:, self.to_grouped], beta[:, self.to_grouped], g[:, self.to_grouped]
        out = gated_delta(
            q.reshape(rows, self.hk, self.dk),
            k.reshape(rows, self.hk, self.dk),
            v,
            g.contiguous(),
            beta.contiguous(),
            states.recurrent[self.state_index],
            states.slots,
            ctx.meta.query_start_loc,
            states.save_at,
            states.save_slot,
        )
        if self.to_file is not None:
            out = out[:, self.to_file]
        out = self._gated_norm(out, z.reshape(rows, self.hv, self.dv))
        return self.out_proj(out.reshape(rows, self.value_dim).to(x.dtype))

    def _gated_norm(self, out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """RMSNorm over each head's values, times ``silu(z)``, in float32 as HF's."""
        out = out.float()
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.norm.weight.float() * out * F.silu(z.float())

    def _conv(self, qkv: torch.Tensor, states: StepStates, starts: list[int]) -> torch.Tensor:
        """The causal depthwise convolution of each sequence's rows, continuing from (and
        updating) its slot's last inputs; a checkpoint takes the inputs before its point."""
        pool = states.conv[self.state_index]
        weight = self.conv1d.weight.float()  # [channels, kernel]
        out = torch.empty(qkv.shape, dtype=torch.float32, device=qkv.device)
        if len(starts) - 1 == qkv.shape[0]:  # decode: every sequence one row, all at once
            window = torch.cat([pool[states.slots], qkv.float()[:, None]], dim=1)
            out[:] = torch.einsum("bkc,ck->bc", window, weight)
            pool[states.slots] = window[:, 1:]
            self._save_conv(pool, states, list(window.unbind(0)))
            return out
        windows = []
        for i, slot in enumerate(states.slots_host):
            first, last = starts[i], starts[i + 1]
            window = torch.cat([pool[slot], qkv[first:last].float()])
            taps = F.conv1d(window.t()[None], weight[:, None], groups=self.conv_dim)
            out[first:last] = taps[0].t()
            pool[slot] = window[last - first :]
            windows.append(window)
        self._save_conv(pool, states, windows)
        return out

    def _save_conv(
        self, pool: torch.Tensor, states: StepStates, windows: list[torch.Tensor]
    ) -> None:
        """Checkpoints: the ``kernel - 1`` inputs before each saving sequence's point
        (``windows``: each sequence's slot inputs, then its rows)."""
        if states.save_at is None:
            return
        for window, (at, slot) in zip(windows, states.saves_host):
            if at >= 0:
                pool[slot] = window[at : at + self.kernel - 1]
