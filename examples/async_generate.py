"""An asyncio app streaming several requests at once through one AsyncEngine."""

from __future__ import annotations

import asyncio
import sys

from llmkit import AsyncEngine, EngineConfig, RequestOutputKind, SamplingParams, default_model


async def stream_one(engine: AsyncEngine, name: str, prompt: str) -> str:
    params = SamplingParams(
        max_tokens=24, temperature=0.7, seed=1, output_kind=RequestOutputKind.DELTA
    )
    text = ""
    async for out in engine.generate(prompt, params):
        text += out.outputs[0].text
        print(f"[{name}] {out.outputs[0].text!r}", flush=True)
    return text


async def main(model: str | None = None) -> list[str]:
    prompts = {"a": "Tell me about rivers", "b": "Write a haiku", "c": "Explain paged attention"}
    async with AsyncEngine(EngineConfig(model or default_model())) as engine:
        return await asyncio.gather(*(stream_one(engine, k, p) for k, p in prompts.items()))


if __name__ == "__main__":
    print(asyncio.run(main(*sys.argv[1:])))
