"""LoRA adapters over the unix socket: each request carries its adapter to the engine."""

from __future__ import annotations

import anyio
import pytest

from llmkit import AsyncEngine, EngineConfig, LoRARequest, SamplingParams
from llmkit.unix import EngineClient, serve_unix

pytestmark = pytest.mark.anyio
GREEDY = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)


@pytest.fixture(scope="module")
def lora_engine(tiny_model):
    engine = AsyncEngine(EngineConfig(tiny_model, max_model_len=256, enable_lora=True))
    engine.start()
    yield engine
    anyio.run(engine.shutdown)


async def _tokens(engine, lora: LoRARequest | None) -> list[int]:
    tokens: list[int] = []
    async for out in engine.generate("the engine serves", GREEDY, lora_request=lora):
        tokens = out.outputs[0].token_ids
    return tokens


async def test_a_request_carries_its_adapter(lora_engine, lora_factory, tmp_path):
    lora = LoRARequest("attn", 1, lora_factory("attn-r4"))
    local = {None: await _tokens(lora_engine, None), "attn": await _tokens(lora_engine, lora)}
    assert local[None] != local["attn"]
    path = tmp_path / "engine.sock"
    async with serve_unix(lora_engine, path), EngineClient(path) as client:
        assert await _tokens(client, None) == local[None]
        assert await _tokens(client, lora) == local["attn"]
        # The engine reads the adapter: a bad one fails its request, not the connection.
        with pytest.raises(ValueError, match="not a PEFT adapter folder"):
            await _tokens(client, LoRARequest("nope", 2, str(tmp_path)))
        with pytest.raises(ValueError, match="pass it as lora_request"):
            await client.add_lora(lora)
        assert await _tokens(client, lora) == local["attn"]
