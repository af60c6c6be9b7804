"""A structured-output constraint compiles off the event loop, within the server's time
limit, once per content: through a real `llmkit serve` and the official openai client,
while another request streams."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import openai
import pytest

API_KEY = "test-key"
USER = [{"role": "user", "content": "Answer in JSON."}]


def nested(kind: str, branches: int) -> dict:
    """``branches`` objects under ``kind``, each a property under ``kind`` again."""
    return {
        kind: [
            {
                "type": "object",
                "properties": {
                    f"k{i}": {kind: [{"type": "integer", "minimum": i}, {"pattern": f"^x{i}"}]}
                },
                "required": [f"k{i}"],
            }
            for i in range(branches)
        ]
    }


@pytest.fixture(scope="module")
def server(module_server, tiny_model):
    # A tenth of a second, so that a 2,000-branch anyOf (half a second here) runs past it.
    return module_server(
        tiny_model, "--structured-outputs-compile-timeout-s", "0.1",
        "--served-model-name", "tiny", "--api-key", API_KEY, "--log-level", "warning",
    )  # fmt: skip


def compiles(server) -> float:
    with server.http() as http:
        text = http.get("/metrics").text
    return float(re.search(r"^llmkit:structured_output_compiles_total (\S+)$", text, re.M)[1])


def schema_request(client: openai.OpenAI, schema: dict):
    return client.chat.completions.create(
        model="tiny", messages=USER, max_tokens=4,
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    )  # fmt: skip


@contextmanager
def streaming(client: openai.OpenAI) -> Iterator[list[float]]:
    """A long completion streams on a thread: the chunks' arrival times, once the first
    has come; the stream is read to its end on leaving."""
    arrivals: list[float] = []
    first = threading.Event()
    chunks = client.completions.create(
        model="tiny", prompt="Once", max_tokens=400, stream=True, extra_body={"ignore_eos": True}
    )
    reader = threading.Thread(
        target=lambda: [(arrivals.append(time.perf_counter()), first.set()) for _ in chunks]
    )
    reader.start()
    assert first.wait(30)
    yield arrivals
    reader.join()


def test_a_slow_schema_is_a_400_while_another_request_streams(server):
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
    # llguidance refuses oneOf outright, unless the machine is so busy that the limit
    # comes first; the 2,000-branch anyOf compiles, for longer than the limit.
    cases = ((nested("oneOf", 2000), ("oneOf", "0.1 s")), (nested("anyOf", 2000), ("0.1 s",)))
    with streaming(client) as arrivals:
        started = time.perf_counter()
        for schema, words in cases:
            with pytest.raises(openai.BadRequestError) as err:
                schema_request(client, schema)
            assert time.perf_counter() - started < 6
            assert err.value.body["param"] == "response_format"
            assert any(word in err.value.message for word in words), err.value.message
        ended = time.perf_counter()
    during = [t for t in arrivals if started <= t <= ended + 0.25]
    gaps = [b - a for a, b in itertools.pairwise(during)]
    assert len(during) > 2 and max(gaps) < 0.25, max(gaps)


def test_the_same_schema_twice_compiles_once(server):
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    before = compiles(server)
    for _ in range(2):
        schema_request(client, schema)
    assert compiles(server) == before + 1
