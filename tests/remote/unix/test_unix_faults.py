"""The protocol spoken by hand over a real socket; bad input gets its answer, the rest goes on."""

from __future__ import annotations

import dataclasses
import math
import os
import random
import socket
import stat

import anyio
import msgpack
import pytest
from anyio.abc import SocketAttribute
from anyio.from_thread import start_blocking_portal
from hypothesis import example, given
from hypothesis import strategies as st
from unix_helpers import RawConnection, settled

from deadlines import scaled
from hostile_values import HOSTILE_SETTINGS, values
from llmkit.remote.unix.data import params_to_wire
from llmkit.remote.unix.protocol import PROTOCOL_VERSION, hello_request
from llmkit.remote.unix.server import serve_unix
from llmkit.sampling_params import RequestOutputKind, SamplingParams

pytestmark = pytest.mark.anyio

SHORT = params_to_wire(SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
LONG = params_to_wire(SamplingParams(temperature=0, max_tokens=400, ignore_eos=True))


def generate(rid: str, prompt: object = "Hello", params: dict = SHORT, **extra: object) -> dict:
    return {"type": "generate", "id": rid, "prompt": prompt, "params": params, **extra}


async def assert_serves(conn, rid: str = "next") -> None:
    await conn.send(generate(rid))
    final = await conn.final(rid)
    assert final["type"] == "final" and final["output"]["outputs"][0]["finish_reason"] == "length"


async def test_a_request_streams_outputs_then_a_final(raw):
    conn = await raw()
    await conn.send(generate("a", {"prompt": "Hi", "prompt_token_ids": [1, 2, 3]}))
    first = await conn.receive()
    assert first["type"] == "output" and first["id"] == "a"
    assert first["output"]["prompt_token_ids"] == [1, 2, 3]
    rest = []
    while (message := await conn.receive())["type"] != "final":
        rest.append(message)
    assert all("prompt_token_ids" not in m["output"] for m in [*rest, message])
    assert (
        message["output"]["finished"]
        and message["output"]["outputs"][0]["finish_reason"] == "length"
    )


async def test_garbage_frame_closes_only_that_connection(raw):
    bystander = await raw()
    await bystander.send(generate("long", params=LONG))
    assert (await bystander.receive())["id"] == "long"
    conn = await raw()
    await conn.stream.send((5).to_bytes(4, "big") + b"\xc1\xc1\xc1\xc1\xc1")  # 0xc1: never used
    error = await conn.receive()
    assert error["type"] == "error" and error["error"]["code"] == "invalid_frame"
    assert await conn.closed_by_peer()
    await assert_serves(bystander)
    await assert_serves(await raw())


async def test_peers_that_vanish_mid_stream_end_their_connections_without_a_stray_callback(
    raw, engine
):
    """The server's write fails as its read sees EOF: neither wait is cancelled under the
    other (anyio's test runner raises what an event-loop callback raised: InvalidStateError)."""
    for _ in range(30):  # each round meets the race about once in twenty, before the fix
        conns = [await raw() for _ in range(6)]
        for conn in conns:
            await conn.send(generate("a", params=LONG))
            await conn.send(generate("b", params=LONG))
        for conn in conns:
            await conn.receive()
        await anyio.sleep(0.02)  # the server streams meanwhile: its writer wakes often
        for conn in conns:  # at once, mid-stream, without a goodbye
            conn.stream.extra(SocketAttribute.raw_socket).close()
    await settled(engine, timeout=10)


async def test_oversize_frame_is_refused_at_its_header(raw):
    conn = await raw()
    await conn.stream.send((1 << 31).to_bytes(4, "big") + b"\x00" * 16)  # 2 GiB announced
    error = await conn.receive()
    assert error["error"]["code"] == "frame_too_large" and str(1 << 31) in error["error"]["message"]
    assert await conn.closed_by_peer()
    await assert_serves(await raw())


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"type": "teleport"}, "type"),
        ({"no": "type"}, "type"),
        (["not", "a", "map"], None),
        ({"type": "generate", "prompt": "x"}, "id"),
        (generate(""), "id"),
        (generate("b", prompt=3.5), "prompt"),
        (generate("b", prompt={"prompt_token_ids": ["a"]}), "prompt.prompt_token_ids"),
        (generate("b", params={"temperature": "hot"}), "params.temperature"),
        (generate("b", params={"n": True}), "params.n"),
        (generate("b", params={"top_p": 0}), "params.top_p"),
        (generate("b", params={"bogus": 1}), "params.bogus"),
        (generate("b", params={"output_kind": 7}), "params.output_kind"),
        (generate("b", params=[1]), "params"),
        (generate("b", priority="high"), "priority"),
        (
            {"type": "encode", "id": "b", "prompt": "x", "params": {"dimensions": 0}},
            "params.dimensions",
        ),
        ({"type": "hello", "version": PROTOCOL_VERSION}, "type"),
    ],
)
async def test_invalid_message_gets_an_error_naming_the_field_and_the_connection_stays(
    raw, message, param
):
    conn = await raw()
    await conn.send(message)
    error = await conn.receive()
    assert error["type"] == "error" and error["error"]["param"] == param
    assert error["error"]["type"] == "invalid_request_error" and error["error"]["message"]
    if isinstance(message, dict) and message.get("id") == "b":
        assert error["id"] == "b"
    await assert_serves(conn)


async def test_input_the_engine_refuses_gets_an_error_with_the_request_id(raw):
    conn = await raw()
    await conn.send(generate("oov", [1, 100_000]))
    error = await conn.receive()
    assert error["id"] == "oov" and "out of vocabulary" in error["error"]["message"]
    await conn.send(generate("long", list(range(5, 600))))
    error = await conn.receive()
    assert error["id"] == "long" and "max_model_len" in error["error"]["message"]
    await conn.send(generate("lp", params={"logprobs": 10_000}))
    error = await conn.receive()
    assert error["error"]["param"] == "params.logprobs"
    await conn.send({"type": "encode", "id": "emb", "prompt": "x"})
    assert "embeddings" in (await conn.receive())["error"]["message"]
    await assert_serves(conn)


async def test_abort_of_an_unknown_id_is_an_error(raw):
    conn = await raw()
    await conn.send({"type": "abort", "id": "ghost"})
    error = await conn.receive()
    assert error["id"] == "ghost" and error["error"]["code"] == "unknown_request"
    await assert_serves(conn)


async def test_abort_ends_the_request_with_a_final_abort(raw, engine):
    conn = await raw()
    await conn.send(generate("long", params=LONG))
    await conn.receive()
    await conn.send({"type": "abort", "id": "long"})
    final = await conn.final("long")
    assert final["type"] == "final" and final["output"]["outputs"][0]["finish_reason"] == "abort"
    await settled(engine)


async def test_duplicate_id_is_an_error_and_the_first_request_goes_on(raw, engine):
    conn = await raw()
    await conn.send(generate("twice", params=LONG))
    await conn.send(generate("twice"))
    messages = []
    while (message := await conn.receive())["type"] != "error":
        messages.append(message)
    assert message["id"] == "twice" and message["error"]["code"] == "duplicate_request_id"
    await conn.send({"type": "abort", "id": "twice"})
    assert (await conn.final("twice"))["output"]["outputs"][0]["finish_reason"] == "abort"
    await assert_serves(conn, "twice")  # free again once it ended
    await settled(engine)


async def test_closing_a_request_frees_it_and_its_id_at_once(raw, engine):
    conn = await raw()
    await conn.send(generate("x", params=LONG))
    await conn.receive()
    await conn.send({"type": "close", "id": "x"})
    await assert_serves(conn, "x")
    await settled(engine)


async def test_stats_and_health_are_answered_and_pushed(raw, engine):
    conn = await raw()
    await conn.send({"type": "stats"})
    stats = await conn.receive(stats=True)
    assert stats["type"] == "stats" and stats["healthy"] is True
    assert stats["stats"]["kv_blocks_total"] == engine.stats().kv_blocks_total
    await conn.send({"type": "health"})
    while (message := await conn.receive(stats=True))["type"] == "stats":
        pass
    assert message == {"type": "health", "healthy": True}


async def test_handshake_must_come_first_and_match_the_version(raw):
    conn = await raw(hello=False)
    await conn.send(generate("early"))
    assert (await conn.receive())["error"]["code"] == "handshake_required"
    assert await conn.closed_by_peer()
    conn = await raw(hello=False)
    await conn.send({"type": "hello", "version": PROTOCOL_VERSION + 1})
    error = await conn.receive()
    assert error["error"]["code"] == "unsupported_version" and error["error"]["param"] == "version"
    assert await conn.closed_by_peer()


async def test_a_reader_that_stalls_gets_coalesced_outputs_not_a_queue(raw, engine):
    # Top-20 logprobs make each token's output ~0.6 kB, so two 500-token requests outrun
    # the socket's buffer: the server must stop reading the engine and let it coalesce.
    params = params_to_wire(
        SamplingParams(
            temperature=0,
            max_tokens=500,
            ignore_eos=True,
            logprobs=20,
            output_kind=RequestOutputKind.DELTA,
        )
    )
    conn = await raw()
    before = engine.stats().generated_tokens
    for rid in ("a", "b"):
        await conn.send(generate(rid, "Hi", params))
    with anyio.fail_after(scaled(60)):  # not reading until both have finished in the engine
        while engine.stats().generated_tokens < before + 1000 or engine.stats().num_running:
            await anyio.sleep(0.05)
    tokens = {"a": 0, "b": 0}
    messages = finals = 0
    while finals < 2:
        message = await conn.receive()
        messages += 1
        tokens[message["id"]] += len(message["output"]["outputs"][0]["token_ids"])
        finals += message["type"] == "final"
    assert tokens == {"a": 500, "b": 500}
    assert messages < 1000  # some outputs carry several tokens


async def test_a_client_that_disconnects_aborts_all_its_requests(raw, engine):
    conn = await raw()
    for i in range(8):
        await conn.send(generate(f"r{i}", params=LONG))
    seen: set[str] = set()
    while len(seen) < 8:
        seen.add((await conn.receive())["id"])
    # The stats snapshot is published after the step: it may lag the outputs a moment.
    with anyio.fail_after(scaled(5)):
        while engine.stats().num_running != 8:
            await anyio.sleep(0.01)
    await conn.stream.aclose()
    await settled(engine)


async def test_socket_file_is_private_and_removed_after(engine, tmp_path):
    path = tmp_path / "private.sock"
    async with serve_unix(engine, path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not path.exists()


async def test_stale_socket_is_replaced_but_nothing_else(engine, tmp_path):
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))  # bound, never listening: as a crashed server leaves it
    async with serve_unix(engine, stale):
        with pytest.raises(OSError, match="another server"):
            async with serve_unix(engine, stale):
                pass
        assert stale.exists()  # the live server's socket was left alone
    regular = tmp_path / "file.sock"
    regular.write_text("precious")
    with pytest.raises(FileExistsError):
        async with serve_unix(engine, regular):
            pass
    assert regular.read_text() == "precious"
    link = tmp_path / "link.sock"
    os.symlink(regular, link)
    with pytest.raises(FileExistsError):
        async with serve_unix(engine, link):
            pass


@pytest.mark.parametrize("seed", [1.5, "7", -(2**63)])
async def test_a_seed_the_engine_cannot_take_is_an_error_and_the_abort_after_it_changes_nothing(
    raw, engine, seed
):
    conn = await raw()
    await conn.send(generate("bad", params={**SHORT, "seed": seed, "temperature": 1.0}))
    with anyio.fail_after(scaled(5)):
        answer = await conn.receive()
    if seed == -(2**63):  # msgpack's most negative int, and a valid seed: it serves
        assert answer["type"] == "output"
        await conn.final("bad")
    else:
        assert answer["type"] == "error" and answer["error"]["param"] == "params.seed"
    await conn.send({"type": "abort", "id": "bad"})
    await conn.receive()  # unknown_request: it ended, or never started
    with anyio.fail_after(scaled(5)):
        await assert_serves(conn)
    stats = await settled(engine)
    assert stats.num_waiting == 0 and stats.num_queued == 0


# Values a hostile or buggy client may put in any field (msgpack carries ints to 64 bits).
HOSTILE = [
    None,
    True,
    -1,
    0,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    "",
    "\u00e9\u0000",
    "nan",
    [],
    [None],
    [2**63 - 1, -5],
    {},
    {"x": float("nan")},
    b"\x00\xff",
]
PARAM_FIELDS = [f.name for f in dataclasses.fields(SamplingParams)] + ["unknown"]


async def test_any_value_in_any_field_is_answered_and_the_connection_serves_on(raw, engine):
    """Random fields set to hostile values, 60 cases: each gets an answer (an error, or
    outputs to the end) within 5 s, and a normal request after it completes."""
    rng = random.Random(34)
    conn = await raw()
    for case in range(60):
        params = dict(SHORT)
        for name in rng.sample(PARAM_FIELDS, rng.randint(1, 3)):
            params[name] = rng.choice(HOSTILE)
        message = generate(f"h{case}", params=params)
        if rng.random() < 0.3:
            message[rng.choice(["prompt", "priority", "lora", "params"])] = rng.choice(HOSTILE)
        await conn.send(message)
        with anyio.fail_after(scaled(5)):
            answer = await conn.final(f"h{case}")
        assert answer["type"] in ("final", "error"), (message, answer)
        with anyio.fail_after(scaled(5)):
            await assert_serves(conn, f"n{case}")
    stats = await settled(engine, timeout=5)
    assert stats.num_waiting == 0 and stats.num_queued == 0


def hostile_frame(message: object) -> bytes:
    """A frame as a careless client packs it: lone surrogates become invalid UTF-8."""
    payload = msgpack.packb(message, use_bin_type=True, unicode_errors="surrogatepass")
    return len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize(
    ("message", "rid", "param"),
    [
        (generate("s", prompt="\ud800"), "s", "prompt"),
        (generate("s", params={**SHORT, "stop": ["ok", "\udfff"]}), "s", "params.stop[1]"),
        (generate("s", params={**SHORT, "\ud83d": 1}), "s", "params"),
        (generate("\ud800"), None, "id"),
        ({"type": "abort", "id": "\udc80"}, None, "id"),
    ],
)
async def test_invalid_utf8_fails_its_request_unquoted_and_the_connection_stays(
    raw, message, rid, param
):
    conn = await raw()
    await conn.stream.send(hostile_frame(message))
    error = await conn.receive()
    assert (error["type"], error["id"], error["error"]["param"]) == ("error", rid, param)
    assert error["error"]["code"] == "invalid_text"
    await assert_serves(conn)


def test_hostile_values_in_any_field_fail_that_request_and_the_connection_serves_on(
    engine, tmp_path
):
    """Property (hypothesis): any value in any field (invalid UTF-8, NaN, 64-bit extremes,
    bytes, nesting) is answered with an error or outputs to the end, and a normal request on
    the same connection after it completes."""
    path = tmp_path / "hostile.sock"
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve_unix(engine, path)),
    ):
        conn = RawConnection(portal.call(anyio.connect_unix, path))
        portal.call(conn.send, hello_request())
        assert portal.call(conn.receive)["type"] == "hello"

        @HOSTILE_SETTINGS
        @given(
            params=st.dictionaries(
                st.sampled_from(PARAM_FIELDS), values(64, binary=True), max_size=3
            ),
            top=st.dictionaries(
                st.sampled_from(["prompt", "priority", "lora"]), values(64, binary=True), max_size=1
            ),
        )
        @example(params={}, top={"prompt": "\ud800"})
        @example(params={"temperature": math.nan, "stop": ["\udc80"]}, top={})
        def case(params: dict, top: dict) -> None:
            message = {**generate("h", params={**SHORT, **params}), **top}
            portal.call(conn.stream.send, hostile_frame(message))
            answer = portal.call(conn.final, "h")
            assert answer["type"] in ("final", "error"), (message, answer)
            portal.call(assert_serves, conn)

        case()
        portal.call(conn.stream.aclose)
