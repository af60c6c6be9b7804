"""A second local process talking to a running engine over its unix socket.

Start the engine, then run this against its socket::

    llmkit engine demo --socket /tmp/llmkit.sock
    python examples/unix_client.py /tmp/llmkit.sock

The client tokenizes here, with the engine's own tokenizer, and streams the outputs of
several requests over one connection.
"""

from __future__ import annotations

import sys

import anyio

from llmkit import RequestOutputKind, SamplingParams
from llmkit.unix import EngineClient


async def stream_one(engine: EngineClient, name: str, prompt: str) -> None:
    params = SamplingParams(max_tokens=16, temperature=0, output_kind=RequestOutputKind.DELTA)
    async for out in engine.generate(prompt, params):
        print(f"[{name}] {out.outputs[0].text!r}", flush=True)


async def main(path: str) -> None:
    async with EngineClient(path) as engine:
        info = engine.model_info
        print(f"connected to {info.name} (max_model_len {info.max_model_len})")
        async with anyio.create_task_group() as tg:
            for name, prompt in {"a": "Tell me about rivers", "b": "Write a haiku"}.items():
                tg.start_soon(stream_one, engine, name, prompt)
        stats = engine.stats()
        print(f"the engine has generated {stats.generated_tokens} tokens in {stats.steps} steps")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
