"""A mixture of experts: a router picks ``top_k`` of ``num_experts`` gated MLPs per row, and
the rows routed to one expert go through its weights together.

A step's rows are grouped by expert (one stable sort of the chosen ids), so each expert's
weights are read once for all the rows routed to it, in prefill as in batched decode; an
expert no row chose is never touched: a decode step reads only the routed experts' bytes.
The experts' weights are float tensors ``[E, 2I, H]`` (gate rows, then up rows) and
``[E, H, I]``, or a GGUF file's blocks (:class:`NativeExperts`): every expert of a tensor is
one packed weight of ``E * rows`` rows, and an expert is a view of its tiles.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from llmkit.model.layers.activation import GatedActivation
from llmkit.model.layers.native import NativeLinear, Part
from llmkit.model.layers.weights.kernel import TILE
from llmkit.model.weights import Weight, read, set_weight_loader

PROJECTIONS = ("gate_proj", "up_proj", "down_proj")  # an expert's, as checkpoints name them


@dataclass(frozen=True)
class Routing:
    """How the router's logits become each row's experts and their weights.

    ``scoring``: softmax over all experts (Qwen3-MoE) or sigmoid; ``renormalize``: the
    chosen weights rescaled to sum to one; ``softmax_after_top_k``: the top ``k`` logits
    chosen first and the softmax taken over them alone (gpt-oss)."""

    top_k: int
    scoring: Literal["softmax", "sigmoid"] = "softmax"
    renormalize: bool = False
    softmax_after_top_k: bool = False

    def route(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``logits`` ``[T, E]`` -> (weights ``[T, k]`` float32, expert ids ``[T, k]``)."""
        logits = logits.float()
        if self.softmax_after_top_k:
            top, ids = logits.topk(self.top_k, dim=-1)
            return top.softmax(-1), ids
        probs = logits.softmax(-1) if self.scoring == "softmax" else logits.sigmoid()
        weights, ids = probs.topk(self.top_k, dim=-1)
        if self.renormalize:
            weights = weights / weights.sum(-1, keepdim=True)
        return weights, ids


class Experts(nn.Module):
    """``num_experts`` gated MLPs as float tensors. A checkpoint's ``gate_proj``, ``up_proj``
    and ``down_proj`` (weights and biases) load through :meth:`load_piece`, one expert's
    (``experts.3.gate_proj.weight``) or every expert's stacked (``experts.gate_proj.weight``,
    ``[E, I, H]``)."""

    def __init__(
        self, num_experts: int, hidden: int, inter: int, bias: bool, act: GatedActivation
    ) -> None:
        super().__init__()
        self.num_experts, self.hidden, self.inter, self.act = num_experts, hidden, inter, act
        self.w13 = nn.Parameter(torch.empty(num_experts, 2 * inter, hidden))
        self.w2 = nn.Parameter(torch.empty(num_experts, hidden, inter))
        self.b13 = nn.Parameter(torch.empty(num_experts, 2 * inter)) if bias else None
        self.b2 = nn.Parameter(torch.empty(num_experts, hidden)) if bias else None
        for param in self.parameters():
            set_weight_loader(param, self.load_piece)

    def load_piece(self, param: nn.Parameter, weight: Weight, piece: int | None) -> None:
        """``piece`` (:func:`expert_target`): which projection, of one expert or of all."""
        assert piece is not None
        expert, which = divmod(piece, len(PROJECTIONS)) if piece >= 0 else (None, -1 - piece)
        target = param.data if expert is None else param.data[expert]
        if which < 2:  # gate rows, then up rows
            target = target.narrow(-1 if param is self.b13 else -2, which * self.inter, self.inter)
        target.copy_(read(weight))

    def forward_expert(self, expert: int, x: torch.Tensor) -> torch.Tensor:
        b13 = None if self.b13 is None else self.b13[expert]
        b2 = None if self.b2 is None else self.b2[expert]
        return F.linear(self.act(F.linear(x, self.w13[expert], b13)), self.w2[expert], b2)


# An expert's projection, one expert's (``experts.3.up_proj.weight``) or all (stacked).
_CHECKPOINT = re.compile(r"(.*\.experts)\.(?:(\d+)\.)?(gate_proj|up_proj|down_proj)\.(weight|bias)")


def unfuse_experts(name: str, weight: Weight) -> Iterator[tuple[str, Weight]]:
    """A checkpoint tensor as the loader takes it: every expert's fused gate/up projection
    ``[E, 2I, H]`` (transformers' ``experts.gate_up_proj``) split in its gate and up
    projections; a stacked ``experts.down_proj`` named as a weight; any other as it is."""
    if name.endswith((".experts.gate_up_proj", ".experts.gate_up_proj.weight")):
        gate, up = read(weight).chunk(2, dim=1)
        base = name.removesuffix(".weight").removesuffix("gate_up_proj")
        yield f"{base}gate_proj.weight", gate
        yield f"{base}up_proj.weight", up
    elif name.endswith(".experts.down_proj"):  # a GGUF file's has its .weight
        yield f"{name}.weight", weight
    else:
        yield name, weight


def expert_target(name: str) -> tuple[str, int] | None:
    """Our parameter and its ``load_piece`` number for checkpoint tensor ``name``, if it is
    an expert's projection (of one expert, or of every expert stacked); else None."""
    m = _CHECKPOINT.fullmatch(name)
    if m is None:
        return None
    base, index, projection, kind = m.groups()
    param = ("w" if kind == "weight" else "b") + ("2" if projection == "down_proj" else "13")
    which = PROJECTIONS.index(projection)
    piece = -1 - which if index is None else int(index) * len(PROJECTIONS) + which
    return f"{base}.{param}", piece


class NativeExperts(nn.Module):
    """The experts as a GGUF file's blocks: ``gate``, ``up`` and ``down`` each one packed
    weight whose rows are every expert's, in order (``E * I`` and ``E * H`` rows); an
    expert's rows are whole tiles of it, read by the format's own kernel. Biases (gpt-oss)
    stay float tensors ``[E, 2I]`` and ``[E, H]``."""

    def __init__(
        self,
        parts: tuple[Part, Part, Part],
        num_experts: int,
        hidden: int,
        inter: int,
        act: GatedActivation,
        biases: tuple[nn.Parameter, nn.Parameter] | None,
    ) -> None:
        super().__init__()
        self.num_experts, self.hidden, self.inter, self.act = num_experts, hidden, inter, act
        # Held by NativeLinear, which keeps their tensors as buffers (moved and counted).
        self.gate, self.up, self.down = (
            NativeLinear([p], k, p.out_features, None)
            for p, k in zip(parts, (hidden, hidden, inter))
        )
        self.b13: nn.Parameter | None = None if biases is None else biases[0]
        self.b2: nn.Parameter | None = None if biases is None else biases[1]

    def forward_expert(self, expert: int, x: torch.Tensor) -> torch.Tensor:
        gate = _expert_linear(self.gate, expert, self.inter, x)
        up = _expert_linear(self.up, expert, self.inter, x)
        gate_up = torch.cat([gate, up], dim=-1)
        if self.b13 is not None:
            gate_up = gate_up + self.b13[expert]
        out = _expert_linear(self.down, expert, self.hidden, self.act(gate_up))
        return out if self.b2 is None else out + self.b2[expert]


def _expert_linear(layer: NativeLinear, expert: int, rows: int, x: torch.Tensor) -> torch.Tensor:
    """``x`` times expert ``expert``'s ``rows`` rows of a stacked native weight: a view of
    its tiles (every field of a packed weight is ``[tiles, ...]``; ``rows`` a whole number
    of tiles, which the loader checks)."""
    part = layer.parts[0]
    first, count = expert * rows // TILE, rows // TILE
    packed = type(part.packed)(
        *(
            t.narrow(0, first, count) if isinstance(t, torch.Tensor) and t.numel() else t
            for t in part.packed
        )
    )
    return part.format.linear(x, packed, rows)


class SparseMoE(nn.Module):
    """Router, experts and an optional shared expert (with its sigmoid gate) for one layer."""

    def __init__(
        self,
        hidden: int,
        inter: int,
        num_experts: int,
        routing: Routing,
        act: GatedActivation,
        router_bias: bool = False,
        expert_bias: bool = False,
        shared: nn.Module | None = None,
        shared_gate: bool = False,
    ) -> None:
        super().__init__()
        self.routing = routing
        self.gate = _Router(hidden, num_experts, router_bias)
        self.experts: Experts | NativeExperts = Experts(
            num_experts, hidden, inter, expert_bias, act
        )
        self.shared_expert = shared
        self.shared_expert_gate = _Router(hidden, 1, False) if shared_gate else None
        # The whole block in one call where a CPU kernel holds its weights (set by the fused
        # step, models/llama_fused.py, while it runs a prompt's layers as modules).
        self.block: Callable[[torch.Tensor], torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.block is not None:
            return self.block(x)
        weights, ids = self.routing.route(self.gate(x))
        out = mix(self.experts, x, weights, ids)
        if self.shared_expert is not None:
            shared = self.shared_expert(x)
            if self.shared_expert_gate is not None:
                shared = shared * torch.sigmoid(self.shared_expert_gate(x))
            out = out + shared
        return out


def mix(
    experts: Experts | NativeExperts, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor
) -> torch.Tensor:
    """Each row of ``x`` through its chosen experts ``ids`` ``[T, k]``, summed with its
    ``weights`` ``[T, k]``: the rows routed to one expert go through it together."""
    out = torch.zeros_like(x)
    k = ids.shape[1]
    flat = ids.flatten()
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=experts.num_experts).tolist()
    rows_of, weight_of = order // k, weights.flatten()[order]
    start = 0
    for expert, count in enumerate(counts):
        if not count:
            continue
        rows = rows_of[start : start + count]
        y = experts.forward_expert(expert, x[rows])
        out.index_add_(0, rows, y * weight_of[start : start + count, None].to(y.dtype))
        start += count
    return out


class _Router(nn.Module):
    """The router's (or the shared expert's gate's) linear layer: float, and not an
    ``nn.Linear``, so that quantizing or repacking a model's linears leaves the choice of
    experts exactly as the checkpoint makes it."""

    def __init__(self, hidden: int, outputs: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(outputs, hidden))
        self.bias = nn.Parameter(torch.empty(outputs)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)
