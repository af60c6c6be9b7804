"""Decode against its memory floor: each step reads every weight once, and each stream its KV.

On a CPU (and a GPU at small batch) decode is memory-bound: a step of ``B`` streams reads
the weights as loaded (the LM head included; the embedding only by the row) plus each
stream's K and V over its context, so ``B * bandwidth / bytes`` bounds its tokens/s. The
bandwidth is measured here (the best of several passes summing a buffer far larger than the
caches, with torch's threads), so a measured rate can be judged against the physical limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

if TYPE_CHECKING:
    from torch import nn

    from llmkit.engine.llm import LLM


@dataclass
class Roofline:
    model: str
    bandwidth: float  # bytes/s, measured
    weight_bytes: int  # read by each decode step
    kv_bytes: int  # K and V of one context token, all layers
    context: int  # tokens of context, on average over the decode
    measured: dict[int, float]  # streams -> output tokens/s

    def floor(self, streams: int) -> float:
        """The tokens/s no decode of ``streams`` streams can pass on this memory."""
        step = self.weight_bytes + streams * self.context * self.kv_bytes
        return streams * self.bandwidth / step

    def report(self) -> str:
        lines = [
            f"model {self.model}: {self.weight_bytes / 2**20:.1f} MiB of weights read per "
            f"step, {self.kv_bytes / 2**10:.1f} KiB of KV per context token (~{self.context} "
            f"tokens); memory bandwidth {self.bandwidth / 1e9:.1f} GB/s "
            f"({torch.get_num_threads()} threads)",
            "| streams | measured tok/s | floor tok/s | share of floor |",
            "|---:|---:|---:|---:|",
        ]
        for streams, rate in sorted(self.measured.items()):
            floor = self.floor(streams)
            lines.append(f"| {streams} | {rate:.1f} | {floor:.1f} | {rate / floor:.0%} |")
        return "\n".join(lines)


def memory_bandwidth(mib: int = 512, passes: int = 5) -> float:
    """Bytes/s read by summing a ``mib`` MiB buffer, the best of ``passes``."""
    buffer = torch.ones(mib * 2**20 // 4)
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - start)
    return buffer.numel() * 4 / best


def decode_reads(model: nn.Module, kv_caches: list[Any]) -> tuple[int, int]:
    """(weight bytes a decode step reads, KV bytes per context token): every tensor the model
    holds once (tied ones once), but an embedding table that nothing else shares, of which a
    step reads one row a token."""
    held: dict[int, int] = {}
    only_embedding: set[int] = set()
    shared: set[int] = set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        key, size = _storage(tensor)
        held[key] = size
        (only_embedding if ".embed_tokens." in f".{name}" else shared).add(key)
    weights = sum(size for key, size in held.items() if key not in only_embedding - shared)
    kv = 0
    for k_cache, v_cache in kv_caches:  # [blocks, block_size, kv_heads, head_dim] each
        kv += (k_cache[0, 0].numel() + v_cache[0, 0].numel()) * k_cache.element_size()
    return weights, kv


def _storage(tensor: torch.Tensor) -> tuple[int, int]:
    """A key for the memory behind ``tensor``, and its bytes; an opaque tensor (oneDNN's
    packed weights) is its own memory."""
    try:
        storage = tensor.untyped_storage()
    except (NotImplementedError, RuntimeError):
        return id(tensor), tensor.numel() * tensor.element_size()
    return storage.data_ptr(), storage.nbytes()


def measure_roofline(
    model: str,
    engine_kwargs: dict[str, Any],
    streams: tuple[int, ...] = (1, 16),
    prompt: int = 16,
    output: int = 128,
) -> Roofline:
    """Decode ``output`` greedy tokens after a ``prompt``-token prompt, in each number of
    ``streams`` at once (after a warm-up), beside the floor of this machine's memory."""
    from llmkit.engine.llm import LLM
    from llmkit.sampling_params import SamplingParams

    kwargs = {"max_num_seqs": max(streams), **engine_kwargs}
    llm = LLM(model, **kwargs)
    params = SamplingParams(temperature=0, max_tokens=output, ignore_eos=True)

    def rate(n: int) -> float:
        prompts: list[Any] = [
            {"prompt_token_ids": [100 + (7 * i + j) % 1000 for j in range(prompt)]}
            for i in range(n)
        ]
        start = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        return n * output / (time.perf_counter() - start)

    rate(1)  # warm up
    measured = {n: rate(n) for n in streams}
    weights, kv = _reads(llm)
    return Roofline(model, memory_bandwidth(), weights, kv, prompt + output // 2, measured)


def _reads(llm: LLM) -> tuple[int, int]:
    runner = llm._core.runner  # in this process: the model and its KV cache
    return decode_reads(cast("nn.Module", runner.model), runner.kv_caches)
