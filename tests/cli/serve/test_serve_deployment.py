"""`llmkit serve` deployment flags: --middleware, --log-config-file, load tracking, content."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from serve_helpers import PARTS_MESSAGE, rendered, template_file

# The folder of serve_helpers.py, which the server imports the middleware from.
TESTS = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def log_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("logs") / "server.log"


@pytest.fixture(scope="module")
def server(module_server, tiny_model, log_file, tmp_path_factory):
    """One server for these flags, with the test middleware importable from this folder."""
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(name)s %(levelname)s %(message)s"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": str(log_file),
                "formatter": "plain",
            }
        },
        "loggers": {
            name: {"level": "INFO", "handlers": ["file"], "propagate": False}
            for name in ("llmkit", "uvicorn")
        },
    }
    config_path = tmp_path_factory.mktemp("log-config") / "logging.json"
    config_path.write_text(json.dumps(config))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    return module_server(
        tiny_model,
        "--api-key",
        "secret",
        "--middleware",
        "serve_helpers:ServedBy",
        "--middleware",
        "serve_helpers.stamp",
        "--log-config-file",
        str(config_path),
        "--enable-server-load-tracking",
        "--chat-template",
        template_file(tmp_path_factory.mktemp("template")),
        "--chat-template-content-format",
        "string",
        env=env,
    )


def test_middleware_by_import_path_adds_its_header_to_every_response(server):
    with server.http(api_key="secret") as http:
        responses = [
            http.get("/health"),
            http.get("/v1/models"),
            http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}),
            http.get("/no/such/route"),
        ]
    with server.http(api_key="wrong") as http:
        responses.append(http.get("/v1/models"))
    assert [r.status_code for r in responses] == [200, 200, 200, 404, 401]
    for response in responses:
        assert response.headers["x-served-by"] == "llmkit-test"
        assert response.headers["x-stamp"] == "1"


def test_the_log_config_file_routes_the_logs_to_its_file(server, log_file):
    prompt = "a prompt that must stay out of the logs"
    with server.http(api_key="secret") as http:
        http.post("/v1/completions", json={"prompt": prompt, "max_tokens": 2}).raise_for_status()
    deadline = time.monotonic() + 10
    while "POST /v1/completions 200" not in log_file.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    logged = log_file.read_text()
    assert "llmkit.http.access INFO POST /v1/completions 200" in logged
    assert "uvicorn.error INFO Application startup complete." in logged
    assert "prompt tokens" in logged and prompt not in logged
    assert "POST /v1/completions" not in server.log.read_text()


def _load(url: str) -> int:
    return httpx.get(url + "/load", timeout=10).json()["server_load"]


def test_load_counts_requests_in_flight_up_and_back_to_zero(server):
    headers = {"Authorization": "Bearer secret"}
    assert _load(server.url) == 0
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        longest = http.get("/v1/models").json()["data"][0]["max_model_len"] - 8
        body = {"prompt": "busy", "max_tokens": longest, "ignore_eos": True, "stream": True}
        # Each stream's line iterator stays referenced: closing it would close the stream.
        with http.stream("POST", "/v1/completions", json=body) as first:
            first_lines = first.iter_lines()
            next(line for line in first_lines if line)
            assert _load(server.url) == 1
            with http.stream("POST", "/v1/completions", json=body) as second:
                second_lines = second.iter_lines()
                next(line for line in second_lines if line)
                assert _load(server.url) == 2
    # Leaving the streams disconnects them; the server aborts both.
    deadline = time.monotonic() + 10
    while _load(server.url) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _load(server.url) == 0


def test_the_string_content_format_joins_the_text_parts(server):
    with server.http(api_key="secret") as http:
        text = rendered(http, [PARTS_MESSAGE, {"role": "assistant", "content": "ok"}])
    assert text == "user: S[red\nblue]\nassistant: S[ok]\n"
