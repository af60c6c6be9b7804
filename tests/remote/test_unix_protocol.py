"""The stream protocol's data survives msgpack; the client rebuilds the outputs of AsyncEngine."""

from __future__ import annotations

import dataclasses
import struct

import msgpack
import pytest

from llmkit.outputs import (
    CompletionOutput,
    EmbeddingOutput,
    EmbeddingRequestOutput,
    Logprob,
    RequestOutput,
    SpecDecodeCounts,
)
from llmkit.protocol.messages import ProtocolError
from llmkit.remote.output_assembly import OutputAssembler, wire_params
from llmkit.remote.unix.data import (
    output_from_wire,
    output_to_wire,
    params_from_wire,
    params_to_wire,
)
from llmkit.remote.unix.protocol import parse_client_message, submit_request
from llmkit.sampling_params import (
    PoolingParams,
    RequestOutputKind,
    SamplingParams,
    StructuredOutputsParams,
)


def over_the_wire(value):
    return msgpack.unpackb(msgpack.packb(value), raw=False, strict_map_key=False)


def test_params_round_trip():
    sampling = SamplingParams(
        n=2,
        temperature=0.5,
        top_k=5,
        seed=7,
        stop=["x", "yz"],
        stop_token_ids=[3],
        max_tokens=None,
        logprobs=2,
        prompt_logprobs=0,
        logit_bias={5: -1.5},
        allowed_token_ids=[1, 2, 5],
        output_kind=RequestOutputKind.DELTA,
    )
    assert params_from_wire(over_the_wire(params_to_wire(sampling)), SamplingParams) == sampling
    constrained = SamplingParams(
        structured_outputs=StructuredOutputsParams(json={"type": "object"}), max_tokens=8
    )
    wire = over_the_wire(params_to_wire(constrained))
    assert params_from_wire(wire, SamplingParams) == constrained
    pooling = PoolingParams(
        normalize=False, dimensions=8, truncate_prompt_tokens=-1, pooling_type="cls"
    )
    assert params_from_wire(over_the_wire(params_to_wire(pooling)), PoolingParams) == pooling


@pytest.mark.parametrize(
    ("data", "param", "text"),
    [
        ({"max_tokens": "9"}, "params.max_tokens", "must be int or null, got str"),
        ({"stop": [1]}, "params.stop", "must be str or a list of str or null"),
        ({"logit_bias": {"a": 1.0}}, "params.logit_bias", "a map of int to float"),
        ({"temperature": -1}, "params.temperature", "temperature must be non-negative"),
        ({"min_tokens": 5, "max_tokens": 2}, "params.min_tokens", "less than or equal"),
    ],
)
def test_params_errors_name_the_field(data, param, text):
    with pytest.raises(ProtocolError, match=text) as info:
        params_from_wire(data, SamplingParams)
    assert info.value.param == param


def test_a_submitted_request_parses_back():
    params = SamplingParams(temperature=0, max_tokens=3)
    prompt = {"prompt": "Hi", "prompt_token_ids": [1, 2]}
    message = parse_client_message(
        over_the_wire(submit_request("generate", "7", prompt, params, 2))
    )
    assert (message.id, message.prompt, message.params, message.priority) == (
        "7",
        prompt,
        params,
        2,
    )


def _output(finished: bool = True) -> RequestOutput:
    logprobs = [{5: Logprob(-0.25, 1, "a"), 9: Logprob(-1.5, 2, "b")}]
    return RequestOutput(
        request_id="r",
        prompt="Hi",
        prompt_token_ids=[1, 2],
        prompt_logprobs=[None, {2: Logprob(-3.0, 4, "x")}],
        outputs=[
            CompletionOutput(0, "a", [5], -0.25, logprobs, "stop" if finished else None, "a"),
            CompletionOutput(1, "", [], None, None, "length" if finished else None, None),
        ],
        finished=finished,
        num_cached_tokens=16,
        spec_decode=SpecDecodeCounts(3, 9, 4, 7),
    )


def test_outputs_round_trip_and_only_the_first_carries_the_prompt():
    out = _output()
    assert output_from_wire(over_the_wire(output_to_wire(out, first=True)), "r") == out
    later = output_from_wire(over_the_wire(output_to_wire(out, first=False)), "r")
    assert later.prompt is None and later.prompt_token_ids == []
    plain = dataclasses.replace(out, spec_decode=None)  # no speculation: no counts
    assert output_from_wire(over_the_wire(output_to_wire(plain, first=True)), "r") == plain


def test_embeddings_travel_as_little_endian_float32():
    out = EmbeddingRequestOutput("e", "Hi", [1, 2], EmbeddingOutput([0.5, -2.0, 1e-3]))
    data = output_to_wire(out, first=True)
    assert data["embedding"] == struct.pack("<3f", 0.5, -2.0, 1e-3)
    back = output_from_wire(over_the_wire(data), "e")
    assert back.outputs.embedding == list(struct.unpack("<3f", data["embedding"]))


def _delta(
    text: str,
    ids: list[int],
    finish: str | None = None,
    index: int = 0,
    first: bool = False,
    finished: bool = False,
) -> RequestOutput:
    return RequestOutput(
        request_id="r",
        prompt="Hi" if first else None,
        prompt_token_ids=[1, 2] if first else [],
        prompt_logprobs=None,
        outputs=[CompletionOutput(index, text, ids, None, None, finish)],
        finished=finished,
    )


def test_cumulative_outputs_are_rebuilt_from_deltas():
    params = SamplingParams(n=2)
    assert wire_params(params).output_kind is RequestOutputKind.DELTA
    assembler = OutputAssembler(params)
    assembler.add(_delta("He", [7], first=True))
    first = assembler.take()
    assert [c.text for c in first.outputs] == ["He", ""] and first.prompt_token_ids == [1, 2]
    assert assembler.take() is None
    assembler.add(_delta("llo", [8, 9]))
    assembler.add(_delta("!", [3], "stop", index=1))
    assembler.add(_delta("", [], "length", finished=True))
    last = assembler.take()
    assert [(c.text, c.token_ids, c.finish_reason) for c in last.outputs] == [
        ("Hello", [7, 8, 9], "length"),
        ("!", [3], "stop"),
    ]
    assert last.finished and last.prompt == "Hi"
    assert first.outputs[0].token_ids == [7]  # what the reader took before is left alone


def test_deltas_a_reader_has_not_taken_are_merged():
    assembler = OutputAssembler(SamplingParams(n=2, output_kind=RequestOutputKind.DELTA))
    assembler.add(_delta("a", [1], index=1, first=True))
    assembler.add(_delta("b", [2], index=0))
    assembler.add(_delta("c", [3], "stop", index=1))
    merged = assembler.take()
    assert [(c.index, c.text, c.token_ids, c.finish_reason) for c in merged.outputs] == [
        (0, "b", [2], None),
        (1, "ac", [1, 3], "stop"),
    ]
    assert merged.prompt == "Hi" and not merged.finished
    last = _delta("", [], "length", finished=True)
    last.spec_decode = SpecDecodeCounts(2, 6, 3, 5)
    assembler.add(_delta("d", [4]))
    assembler.add(last)
    merged = assembler.take()
    assert merged.finished and merged.spec_decode == SpecDecodeCounts(2, 6, 3, 5)
