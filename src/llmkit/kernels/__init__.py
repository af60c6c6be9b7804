"""Triton kernels for llmkit (paged attention, KV cache writes)."""
