"""Two engine replicas on a local Ray cluster behind one `llmkit serve`: the OpenAI API as
against one engine, shared prefixes routed to one replica, and a killed replica survived."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from tests.transports.openai.test_openai_api import (  # run here too, against the replicas
    test_chat_stream_equals_non_stream,
    test_completion_stream_equals_non_stream,
    test_models_tokenize_detokenize_version,
    test_multiple_prompts_get_consecutive_indices,
    test_n3_with_seed_gives_three_indexed_choices,
    test_stop_string_and_max_completion_tokens,
    test_streamed_logprobs_match_non_streamed,
    test_usage_counts_prompt_and_completion_tokens,
)

from deadlines import Deadline, scaled
from serve_helpers import metric

ray = pytest.importorskip("ray")

__all__ = [
    "test_chat_stream_equals_non_stream",
    "test_completion_stream_equals_non_stream",
    "test_models_tokenize_detokenize_version",
    "test_multiple_prompts_get_consecutive_indices",
    "test_n3_with_seed_gives_three_indexed_choices",
    "test_stop_string_and_max_completion_tokens",
    "test_streamed_logprobs_match_non_streamed",
    "test_usage_counts_prompt_and_completion_tokens",
]

MODEL = "tiny"
SHARED = "the quick brown fox jumps over the lazy dog " * 8


@pytest.fixture
def anyio_backend() -> str:
    # The openai client's async transport runs on asyncio.
    return "asyncio"


@pytest.fixture(scope="module")
def server(replicas_server):
    return replicas_server


def replicas() -> dict[str, object]:
    """The server's replica actors, by name, from this process's side of the cluster."""
    named = ray.util.list_named_actors(all_namespaces=True)
    return {
        a["name"]: ray.get_actor(a["name"], namespace=a["namespace"])
        for a in named
        if a["name"].startswith("llmkit-replica-")
    }


def prompt_tokens() -> dict[str, int]:
    return {name: ray.get(actor.stats.remote()).prompt_tokens for name, actor in replicas().items()}


def long_stream(client):
    """A streamed completion that runs for seconds (32 choices of 240 tokens), once it has
    sent its first chunk."""
    stream = client.completions.create(
        model=MODEL,
        prompt="hello",
        n=32,
        max_tokens=240,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    next(iter(stream))
    return stream


def running_replica():
    """The one replica that runs a request (its stats are published after its step: they
    may lag the first chunk a moment)."""
    deadline = Deadline(5, "one replica to report the request running")
    while (
        len(running := [a for a in replicas().values() if ray.get(a.stats.remote()).num_running])
        != 1
    ):
        assert not deadline.passed(), deadline.error(f"{len(running)} replicas report one")
        time.sleep(0.05)
    return running[0]


def test_shared_prefixes_go_to_one_replica_and_others_spread(client):
    before = prompt_tokens()
    for i in range(4):
        client.completions.create(model=MODEL, prompt=SHARED + f"question {i}", max_tokens=2)
    grown = {name: n - before[name] for name, n in prompt_tokens().items()}
    assert sorted(grown.values())[0] == 0 and sorted(grown.values())[1] > 0
    (busy,) = [name for name, n in grown.items() if n]
    assert ray.get(replicas()[busy].stats.remote()).prefix_cache_hit_rate > 0

    before = prompt_tokens()
    for word in ("red", "green", "blue", "yellow"):
        client.completions.create(model=MODEL, prompt=word, max_tokens=2)
    assert all(n > before[name] for name, n in prompt_tokens().items())


def test_a_client_that_leaves_aborts_its_request_on_the_replica(client, server):
    stream = long_stream(client)
    running_replica()
    stream.close()
    deadline = Deadline(5, "the replica to abort the request")
    while sum(ray.get(a.stats.remote()).num_running for a in replicas().values()):
        assert not deadline.passed(), deadline.error()
        time.sleep(0.05)
    # The server's stats are the replicas' added up, as polled a moment later.
    with server.http() as http:
        deadline = Deadline(2, "/metrics to stop counting the request")
        while metric(http.get("/metrics").text, "llmkit:num_requests_running"):
            assert not deadline.passed(), deadline.error()
            time.sleep(0.05)
        replicas_total = sum(ray.get(a.stats.remote()).prompt_tokens for a in replicas().values())
        deadline = Deadline(2, "/metrics to add the replicas' prompt tokens up")
        while metric(http.get("/metrics").text, "llmkit:prompt_tokens_total") != replicas_total:
            assert not deadline.passed(), deadline.error()
            time.sleep(0.05)


def test_an_adapter_loaded_at_run_time_serves_on_every_replica(
    client, server, tiny_model, lora_factory
):
    from llmkit import LLM, LoRARequest, SamplingParams

    prompts = ["red", "green", "blue", "yellow"]
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    adapter = LoRARequest("attn", 1, lora_factory("attn-r4"))
    with server.http() as http:
        body = {"lora_name": "attn", "lora_path": adapter.path}
        assert http.post("/v1/load_lora_adapter", json=body).status_code == 200
    llm = LLM(tiny_model, enable_lora=True)
    expected = [o.outputs[0].text for o in llm.generate(prompts, params, lora_request=adapter)]
    base = [o.outputs[0].text for o in llm.generate(prompts, params)]
    assert expected != base
    before = prompt_tokens()
    for name, texts in (("attn", expected), (MODEL, base)):
        for prompt, text in zip(prompts, texts):
            got = client.completions.create(model=name, prompt=prompt, max_tokens=6, temperature=0)
            assert got.choices[0].text == text
    assert all(n > before[name] for name, n in prompt_tokens().items())  # both replicas served
    with server.http() as http:
        assert http.post("/v1/unload_lora_adapter", json={"lora_name": "attn"}).status_code == 200
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="attn", prompt="red", max_tokens=1)


def test_a_killed_replica_fails_its_request_and_the_other_serves(client, server):
    stream = long_stream(client)
    ray.kill(running_replica())
    start = time.monotonic()
    with pytest.raises(openai.APIError, match="died"):
        for _ in stream:
            pass
    assert time.monotonic() - start < scaled(5)
    for word in ("one", "two", "three"):
        done = client.completions.create(model=MODEL, prompt=word, max_tokens=4)
        assert done.usage.completion_tokens == 4
    assert httpx.get(server.url + "/health").status_code == 200
