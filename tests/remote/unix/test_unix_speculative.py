"""`llmkit engine --speculative-config`: an EngineClient sees each request's speculation
counts as an in-process AsyncEngine reports them."""

from __future__ import annotations

import json

import anyio
import pytest

from deadlines import scaled
from llmkit import AsyncEngine, EngineConfig, SamplingParams
from llmkit.unix import EngineClient
from servers import start_engine, stop

pytestmark = pytest.mark.anyio

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2}
PROMPT = "one two three one two three one two three one"


async def stream(engine, params: SamplingParams) -> list:
    return [out async for out in engine.generate(PROMPT, params)]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a process start is slow; one loop will do
async def test_a_remote_engine_reports_the_counts_an_in_process_one_does(tiny_model, tmp_path):
    params = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
    config = EngineConfig(tiny_model, max_model_len=512, speculative_config=NGRAM)
    async with AsyncEngine(config) as local:
        expected = await stream(local, params)
    path = tmp_path / "engine.sock"
    spec = json.dumps(NGRAM)
    proc = start_engine(
        tiny_model,
        path,
        tmp_path / "engine.log",
        "--max-model-len",
        "512",
        "--speculative-config",
        spec,
    )
    try:
        async with EngineClient(path) as client:
            with anyio.fail_after(scaled(60)):
                got = await stream(client, params)
    finally:
        stop(proc)
    counts = expected[-1].spec_decode
    assert counts is not None and counts.num_draft_tokens > 0
    assert got[-1].spec_decode == counts
    assert got[-1].outputs[0].token_ids == expected[-1].outputs[0].token_ids
    # Every streamed output carries the counts so far, never more than the final ones.
    assert all(o.spec_decode is not None for o in got)
    assert [o.spec_decode.num_drafts for o in got] == sorted(o.spec_decode.num_drafts for o in got)
