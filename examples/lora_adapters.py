"""One base model, several LoRA adapters (PEFT folders), batched together in one `generate`.

python examples/lora_adapters.py MODEL NAME=ADAPTER_DIR [NAME=ADAPTER_DIR ...]
"""

from __future__ import annotations

import sys

from llmkit import LLM, LoRARequest, SamplingParams


def main(model: str, *adapters: str) -> dict[str, str]:
    loras = [
        LoRARequest(name, i + 1, path)
        for i, (name, _, path) in enumerate(a.partition("=") for a in adapters)
    ]
    llm = LLM(model, enable_lora=True, max_loras=len(loras), max_lora_rank=64)
    prompt = "The capital of France is"
    params = SamplingParams(temperature=0, max_tokens=16)
    # One prompt per model, all in one batch; None runs the base model alone.
    choices: list[LoRARequest | None] = [None, *loras]
    outputs = llm.generate([prompt] * len(choices), params, lora_request=choices)
    texts = {}
    for lora, out in zip(choices, outputs):
        name = "base" if lora is None else lora.name
        texts[name] = out.outputs[0].text
        print(f"{name}: {prompt!r} -> {texts[name]!r}")
    return texts


if __name__ == "__main__":
    main(*sys.argv[1:])
