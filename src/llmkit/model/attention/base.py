"""The attention interface: a step's batch layout and the backend every attention layer calls.

The KV cache of one layer is a pair of tensors shaped ``[num_blocks, block_size,
num_kv_heads, head_dim]``. A step's tokens are one flattened, unpadded batch; request
``i`` owns query rows ``query_start_loc[i]:query_start_loc[i+1]``, which are the last
``q_len`` positions of its ``seq_lens[i]`` tokens of context, read through
``block_tables[i]``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class AttentionSpec:
    """How one layer attends, which every backend and the fused CPU step honour.

    ``window``: the keys a query sees, itself included (HF's ``sliding_window``: key ``j`` is
    seen from position ``p`` when ``p - j < window``); None sees the whole context.
    ``softcap``: scores become ``softcap * tanh(score / softcap)`` before the softmax.
    ``sinks``: ``[H_q]`` float32 logits of one extra key per head whose value is zero
    (gpt-oss): they take a share of the softmax and add nothing to the output.
    """

    scale: float
    window: int | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None

    @property
    def plain(self) -> bool:
        """Scaled dot-product attention over the whole causal context and nothing more."""
        return self.window is None and self.softcap is None and self.sinks is None

    def first_key(self, position: int) -> int:
        """The first key position a query at ``position`` sees."""
        return 0 if self.window is None else max(0, position - self.window + 1)


@dataclass
class AttentionMetadata:
    """The step's batch layout, built once per step by the runner and shared by all layers."""

    query_start_loc: torch.Tensor  # [B + 1] int32
    seq_lens: torch.Tensor  # [B] int32, context length including this step's tokens
    block_tables: torch.Tensor  # [B, max_blocks] int32
    slot_mapping: torch.Tensor  # [T] int64, -1 for tokens that write no KV
    max_query_len: int
    max_seq_len: int
    # Host copies, so backends that loop on the host never sync with the device.
    query_start_loc_host: list[int]
    seq_lens_host: list[int]

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens_host)

    def select(self, reqs: list[int]) -> tuple[AttentionMetadata, torch.Tensor]:
        """The layout of requests ``reqs`` alone, and their query rows in this one (int64)."""
        starts = self.query_start_loc_host
        spans = [range(starts[i], starts[i + 1]) for i in reqs]
        device = self.query_start_loc.device
        rows = torch.tensor([r for span in spans for r in span], dtype=torch.int64, device=device)
        sub_starts = [0]
        for span in spans:
            sub_starts.append(sub_starts[-1] + len(span))
        index = torch.tensor(reqs, dtype=torch.int64, device=device)
        seq_lens = [self.seq_lens_host[i] for i in reqs]
        meta = AttentionMetadata(
            query_start_loc=torch.tensor(sub_starts, dtype=torch.int32, device=device),
            seq_lens=self.seq_lens[index],
            block_tables=self.block_tables[index],
            slot_mapping=self.slot_mapping[rows],
            max_query_len=max((len(span) for span in spans), default=0),
            max_seq_len=max(seq_lens, default=0),
            query_start_loc_host=sub_starts,
            seq_lens_host=seq_lens,
        )
        return meta, rows


class AttentionBackend(ABC):
    """Writes a step's K/V into the paged cache and computes causal attention through it.

    The runner calls :meth:`prepare` once per step, before the model's forward, with the
    step's metadata; every layer then calls :meth:`write_kv` and :meth:`forward` with
    that same metadata.
    """

    name: str

    @abstractmethod
    def prepare(self, meta: AttentionMetadata, block_size: int, dtype: torch.dtype) -> None:
        """Derive, once per step, what every layer's :meth:`forward` on ``meta`` reuses.

        ``block_size`` is the KV cache's tokens per block and ``dtype`` the query's.
        """

    @abstractmethod
    def write_kv(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        """Store ``key``/``value`` ``[T, H_kv, D]`` at ``slot_mapping`` (``-1`` is skipped)."""

    @abstractmethod
    def forward(
        self,
        query: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
        spec: AttentionSpec,
    ) -> torch.Tensor:
        """Causal paged attention for ``query`` ``[T, H_q, D]`` as ``spec`` says; returns
        ``[T, H_q, D]``."""
