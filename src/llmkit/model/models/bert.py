"""BERT-family encoders for embeddings (all-MiniLM-L6-v2 and other sentence-transformers models).

Every request's tokens attend to each other both ways, so a request is computed whole in
one step and nothing is cached: the model keeps no KV cache and reads only
``query_start_loc_host`` from the step's metadata.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from llmkit.model.context import ForwardContext
from llmkit.model.weights import check_all_loaded, copy_weight

if TYPE_CHECKING:
    from transformers import PretrainedConfig

_ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


@dataclass
class _Layout:
    """The step's sequences reordered so that equal lengths sit in contiguous rows.

    Each run of equal-length sequences is then one dense ``[count, length]`` attention
    call over a view of the rows: no padding, no mask, no gather inside the layers.
    """

    order: torch.Tensor | None  # [T] flat rows in grouped order; None: already grouped
    restore: torch.Tensor | None  # [T] the inverse permutation
    groups: list[tuple[int, int, int]]  # (first row, number of sequences, length)


def _layout(starts: list[int], device: torch.device) -> _Layout:
    lens = [starts[i + 1] - starts[i] for i in range(len(starts) - 1)]
    seqs = sorted(range(len(lens)), key=lambda i: -lens[i])  # stable: arrival order within a length
    groups: list[tuple[int, int, int]] = []
    row = 0
    for i in seqs:
        n = lens[i]
        if groups and groups[-1][2] == n:
            first, count, _ = groups[-1]
            groups[-1] = (first, count + 1, n)
        else:
            groups.append((row, 1, n))
        row += n
    if all(seqs[j] == j for j in range(len(seqs))):
        return _Layout(None, None, groups)
    order = torch.cat([torch.arange(starts[i], starts[i + 1]) for i in seqs]).to(device)
    restore = torch.empty_like(order)
    restore[order] = torch.arange(len(order), device=device)
    return _Layout(order, restore, groups)


class BertOutput(nn.Module):
    """Projection, residual, then LayerNorm: BERT normalizes after each sublayer (post-LN)."""

    def __init__(self, in_size: int, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(in_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class BertAttention(nn.Module):
    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.head_dim = cfg.hidden_size // self.num_heads
        self.qkv_proj = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.output = BertOutput(cfg.hidden_size, cfg)

    def forward(self, x: torch.Tensor, groups: list[tuple[int, int, int]]) -> torch.Tensor:
        qkv = self.qkv_proj(x)
        out = torch.empty_like(x)
        h, d = self.num_heads, self.head_dim
        for row, count, length in groups:
            rows = slice(row, row + count * length)
            # [count*length, 3*H*D] -> 3 x [count, H, length, D], all views of qkv
            q, k, v = qkv[rows].view(count, length, 3, h, d).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(q, k, v)
            out[rows].view(count, length, h, d).copy_(o.transpose(1, 2))
        return self.output(out, x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        if cfg.hidden_act not in _ACTIVATIONS:
            raise ValueError(
                f"BERT hidden_act {cfg.hidden_act!r} is not supported; "
                f"use one of {', '.join(_ACTIVATIONS)}"
            )
        self.act = _ACTIVATIONS[cfg.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertOutput(cfg.intermediate_size, cfg)

    def forward(self, x: torch.Tensor, groups: list[tuple[int, int, int]]) -> torch.Tensor:
        x = self.attention(x, groups)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.num_hidden_layers))


class BertEmbeddings(nn.Module):
    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # One text per input, so every token is of segment (token type) 0.
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        return self.LayerNorm(x + self.token_type_embeddings.weight[0])


class BertModel(nn.Module):
    """A BERT encoder returning final hidden states ``[T, hidden]`` of an unpadded batch."""

    # Read by the engine: no KV cache, no chunking, no generation.
    is_encoder = True
    # vLLM's default for BERT embedding models without a sentence-transformers config.
    default_pooling_type = "cls"
    # Checkpoint name piece -> shard of our fused q/k/v projection.
    stacked: ClassVar[dict[str, int]] = {
        "attention.self.query.": 0,
        "attention.self.key.": 1,
        "attention.self.value.": 2,
    }
    # Heads of other tasks, and a buffer HF saves alongside the weights.
    ignored = ("pooler.", "cls.", "embeddings.position_ids")

    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"BERT position_embedding_type {cfg.position_embedding_type!r} is not supported "
                "(only 'absolute')"
            )
        self.config = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        # The runner's model interface; an encoder keeps no KV cache.
        self.num_layers = cfg.num_hidden_layers

    def forward(self, input_ids: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        layout = _layout(ctx.meta.query_start_loc_host, input_ids.device)
        positions = ctx.positions
        if layout.order is not None:
            input_ids, positions = input_ids[layout.order], positions[layout.order]
        x = self.embeddings(input_ids, positions)
        for layer in self.encoder.layer:
            x = layer(x, layout.groups)
        return x if layout.restore is None else x[layout.restore]

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        hidden = self.config.hidden_size
        for name, tensor in weights:
            # BertForMaskedLM and friends keep the encoder under "bert."; checkpoints
            # converted from TensorFlow name LayerNorm parameters gamma and beta.
            name = name.removeprefix("bert.")
            name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
            name = name.replace("LayerNorm.beta", "LayerNorm.bias")
            if name.startswith(self.ignored):
                continue
            for piece, shard in self.stacked.items():
                if piece in name:
                    name = name.replace(piece, "attention.qkv_proj.")
                    params[name].data[shard * hidden : (shard + 1) * hidden].copy_(tensor)
                    break
            else:
                copy_weight(params, name, tensor)
            loaded.add(name)
        check_all_loaded(params, loaded)


class BertForMaskedLM(BertModel):
    """A masked-LM checkpoint served as an encoder for embeddings; its LM head is not loaded."""
