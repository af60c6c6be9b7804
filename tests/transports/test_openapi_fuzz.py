"""schemathesis against /openapi.json of a real server: over 1,000 generated requests across
every route, no 5xx, every 4xx in OpenAI's error shape, and the server healthy after."""

from __future__ import annotations

import collections

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

KEY = "fuzz-key"
ERROR_FIELDS = {"message", "type", "param", "code"}
CASES: collections.Counter[str] = collections.Counter()
STATUSES: collections.Counter[tuple[str, int]] = collections.Counter()


@pytest.fixture(scope="module")
def fuzz_server(module_server, tiny_model):
    # A short context keeps each generated completion cheap: max_tokens is bounded by it.
    return module_server(
        tiny_model,
        "--max-model-len",
        "48",
        "--max-logprobs",
        "3",
        "--max-num-seqs",
        "128",
        "--api-key",
        KEY,
        "--served-model-name",
        "tiny",
        "--disable-uvicorn-access-log",
        "--log-level",
        "error",
    )


def _check(case, response) -> None:
    where = f"{case.method} {case.path} {case.body!r}"
    assert response.status_code < 500, f"{where} -> {response.status_code} {response.text}"
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"}, where
        assert set(body["error"]) == ERROR_FIELDS, where
        assert isinstance(body["error"]["message"], str), where


# schemathesis's pytest integration (from_fixture) does not run on pytest 9, so the server,
# which starts in a fixture, is fuzzed through its Python API: one Hypothesis run per route.
@pytest.mark.parametrize(
    ("mode", "examples"), [(GenerationMode.POSITIVE, 150), (GenerationMode.NEGATIVE, 40)]
)
def test_generated_requests(fuzz_server, mode, examples):
    schema = schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")
    for result in schema.get_all_operations():
        operation = result.ok()
        if mode is GenerationMode.NEGATIVE and operation.method.upper() != "POST":
            continue  # a GET without parameters has no invalid form

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case) -> None:
            response = case.call(headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
            CASES[f"{case.method} {case.path}"] += 1
            STATUSES[f"{case.method} {case.path}", response.status_code] += 1
            _check(case, response)

        run()


def test_all_routes_fuzzed_and_the_server_healthy_after(fuzz_server):
    print(sum(CASES.values()), "cases:", dict(sorted(STATUSES.items())))
    assert sum(CASES.values()) >= 1000
    # Every route (the document itself is what schemathesis loads).
    assert len(CASES) == 12
    # The generated requests reached the engine, not only its checks.
    for route in ("POST /v1/completions", "POST /v1/chat/completions", "POST /tokenize"):
        assert STATUSES[route, 200] > 0, route
    with httpx.Client(base_url=fuzz_server.url, timeout=30) as http:
        assert http.get("/readyz").status_code == 200
        assert http.get("/livez").status_code == 200
        metrics = http.get("/metrics").text
    running = [line for line in metrics.splitlines() if line.startswith("llmkit:num_requests_")]
    assert all(line.endswith(" 0.0") for line in running), running
