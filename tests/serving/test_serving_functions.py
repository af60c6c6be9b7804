"""serving/ on a real engine with no transport, as the WebSocket and unix transports use it."""

from __future__ import annotations

import anyio
import pytest

from llmkit import AsyncEngine, EngineConfig
from llmkit.protocol.openai import ChatCompletionRequest, CompletionRequest
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import OpenAIError
from llmkit.serving.openai.chat import create_chat, prepare_chat, stream_chat
from llmkit.serving.openai.completions import (
    create_completion,
    prepare_completion,
    stream_completion,
)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def engine(tiny_model):
    engine = AsyncEngine(EngineConfig(model=tiny_model, max_model_len=128, max_logprobs=5))
    engine.start()
    yield engine
    anyio.run(engine.shutdown)


@pytest.fixture
def ctx(engine) -> ServingContext:
    return ServingContext(engine=engine, model_names=["tiny"])


async def collect(stream_fn, ctx, job) -> list:
    chunks = []

    async def emit(chunk) -> None:
        chunks.append(chunk)

    await stream_fn(ctx, job, emit)
    return chunks


@pytest.mark.anyio
async def test_streamed_chunks_join_to_the_plain_response(ctx):
    req = CompletionRequest(prompt=["one", "two"], n=2, max_tokens=8, temperature=0.0, logprobs=1)
    full = await create_completion(ctx, await prepare_completion(ctx, req, "cmpl-a"))
    streamed = CompletionRequest.model_validate(
        {**req.model_dump(), "stream": True, "stream_options": {"include_usage": True}}
    )
    chunks = await collect(
        stream_completion, ctx, await prepare_completion(ctx, streamed, "cmpl-b")
    )
    texts = ["", "", "", ""]
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        texts[choice.index] += choice.text
    assert texts == [c.text for c in full.choices]
    assert chunks[-1].choices == [] and chunks[-1].usage == full.usage


@pytest.mark.anyio
async def test_chat_stream_starts_with_roles_and_ends_with_usage(ctx):
    req = ChatCompletionRequest(
        messages=[{"role": "user", "content": "hi"}],
        n=2,
        max_tokens=5,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )
    chunks = await collect(stream_chat, ctx, await prepare_chat(ctx, req, "chatcmpl-a"))
    assert [c.choices[0].delta.role for c in chunks[:2]] == ["assistant", "assistant"]
    assert all(c.usage is not None for c in chunks)
    assert chunks[-1].usage.completion_tokens == 10
    plain = ChatCompletionRequest.model_validate(
        {**req.model_dump(), "stream": False, "stream_options": None}
    )
    full = await create_chat(ctx, await prepare_chat(ctx, plain, "chatcmpl-b"))
    assert full.usage.completion_tokens == 10


@pytest.mark.anyio
async def test_a_bad_request_queues_nothing(ctx, engine):
    before = engine.stats().prompt_tokens
    for req in [
        CompletionRequest(prompt="a", logprobs=6),
        CompletionRequest(prompt=[1, 10**6]),
        CompletionRequest(prompt=list(range(10, 130))),
        CompletionRequest(prompt="a", model="other"),
    ]:
        with pytest.raises(OpenAIError):
            await prepare_completion(ctx, req, "cmpl-bad")
    assert engine.stats().prompt_tokens == before


@pytest.mark.anyio
async def test_cancelling_a_stream_aborts_its_engine_requests(ctx, engine):
    req = CompletionRequest(prompt=["a", "b"], max_tokens=100, ignore_eos=True, stream=True)
    job = await prepare_completion(ctx, req, "cmpl-cancel")
    received = 0

    async def emit(chunk) -> None:
        nonlocal received
        received += 1
        if received == 3:
            scope.cancel()  # what a transport does when its client disconnects

    with anyio.CancelScope() as scope:
        await stream_completion(ctx, job, emit)
    with anyio.fail_after(5):
        while engine.stats().num_running or engine.stats().num_waiting:
            await anyio.sleep(0.01)
    assert engine.stats().kv_blocks_free == engine.stats().kv_blocks_total
