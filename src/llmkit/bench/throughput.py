"""Offline generation throughput: the workload's prompts through ``LLM.generate`` at once."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from llmkit.bench.workload import Workload, machine


@dataclass
class ThroughputResult:
    model: str
    requests: int
    elapsed: float
    prompt_tokens: int
    output_tokens: int

    def report(self) -> str:
        total = self.prompt_tokens + self.output_tokens
        return (
            f"model {self.model}; {machine()}\n"
            f"{self.requests} requests in {self.elapsed:.2f} s: "
            f"{self.requests / self.elapsed:.2f} req/s, {self.output_tokens / self.elapsed:.1f} "
            f"output tok/s, {total / self.elapsed:.1f} total tok/s"
        )


def measure_throughput(
    model: str, num_prompts: int, workload: Workload, engine_kwargs: dict[str, Any]
) -> ThroughputResult:
    """Greedy, ``ignore_eos`` generation of ``num_prompts`` prompts, after a short warm-up."""
    from llmkit.engine.llm import LLM
    from llmkit.sampling_params import SamplingParams

    llm = LLM(model, **engine_kwargs)
    prompts = workload.prompts(num_prompts)
    params = SamplingParams(max_tokens=workload.output_len, ignore_eos=True, temperature=0.0)
    llm.generate(prompts[:2], SamplingParams(max_tokens=4), use_tqdm=False)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    return ThroughputResult(
        model=model,
        requests=len(prompts),
        elapsed=elapsed,
        prompt_tokens=sum(len(o.prompt_token_ids) for o in outputs),
        output_tokens=sum(len(o.outputs[0].token_ids) for o in outputs),
    )
