"""Attention backends behind one interface: the torch reference (CPU and CUDA) and Triton.

:func:`create_backend` imports the Triton backend only when it is asked for, so a
torch-only install never imports ``triton``.
"""

from __future__ import annotations

from llmkit.model.attention.base import AttentionBackend, AttentionMetadata, AttentionSpec
from llmkit.model.attention.torch import TorchAttentionBackend

__all__ = [
    "AttentionBackend",
    "AttentionMetadata",
    "AttentionSpec",
    "TorchAttentionBackend",
    "create_backend",
]


def create_backend(name: str) -> AttentionBackend:
    """The backend called ``name``: ``"torch"`` or ``"triton"``."""
    if name == "torch":
        return TorchAttentionBackend()
    if name == "triton":
        from llmkit.model.attention.triton import TritonAttentionBackend

        return TritonAttentionBackend()
    raise ValueError(f"attention_backend must be 'auto', 'torch' or 'triton', got {name!r}")
