"""Offline batch generation with `LLM` on the built-in demo model (random weights: noise)."""

from __future__ import annotations

import sys

from llmkit import LLM, SamplingParams


def main(model: str = "demo") -> list[str]:
    llm = LLM(model)
    prompts = ["The capital of France is", "Once upon a time", "def fibonacci(n):"]
    params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=32, seed=0)
    texts = []
    for out in llm.generate(prompts, params):
        texts.append(out.outputs[0].text)
        print(f"{out.prompt!r} -> {out.outputs[0].text!r}")
    return texts


if __name__ == "__main__":
    main(*sys.argv[1:])
