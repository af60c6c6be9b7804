"""Fill in the middle for editors: a code model's FIM prompt from a prefix and a suffix
(OpenAI's completions, Ollama's /api/generate), its capability, and the 400 of a model
without FIM tokens."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from llmkit import AsyncEngine, EngineConfig
from llmkit.engine.core.fim import FimTokens, infill_prompt
from llmkit.http import create_app
from llmkit.model.demo import ModelSpec

QWEN = {"<|fim_prefix|>": 1, "<|fim_suffix|>": 2, "<|fim_middle|>": 3, "<|repo_name|>": 4,
        "<|file_sep|>": 5}  # fmt: skip


def _chars(text: str) -> list[int]:
    return [100 + ord(c) for c in text]


def test_the_prompt_is_llama_servers_repository_layout():
    fim = FimTokens.find(QWEN)
    assert fim.missing == [] and FimTokens.find({"<PRE>": 1}).missing == ["fim_suf", "fim_mid"]
    ids = infill_prompt(
        fim, _chars, _chars("ab"), _chars("yz"), [("u.py", "x")], _chars("c"), bos=0
    )
    want = [0, 4, *_chars("myproject\n"), 5, *_chars("u.py\n"), *_chars("x"),
            5, *_chars("filename\n"), 1, *_chars("abc"), 2, *_chars("yz"), 3]  # fmt: skip
    assert ids == want
    # Little room: the prefix keeps its end, the suffix its start, the repository none.
    short = infill_prompt(fim, _chars, _chars("0123456789"), _chars("wxyz"), room=16)
    assert short == [1, *_chars("0123456789"), 2, *_chars("w"), 3]
    short = infill_prompt(fim, _chars, _chars("0123456789"), _chars("wxyz"), room=12)
    assert short == [1, *_chars("123456789"), 2, 3]
    assert len(infill_prompt(fim, _chars, _chars("ab" * 50), [], [("f", "x" * 90)], room=64)) == 64


@pytest.fixture(scope="module")
def fim_model(model_factory) -> str:
    return model_factory(ModelSpec(architecture="qwen2", fim=True))


def _client(engine: AsyncEngine) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(engine))
    return httpx.AsyncClient(transport=transport, base_url="http://test")


def _served(path: str, body):
    async def main():
        engine = AsyncEngine(EngineConfig(model=path, max_model_len=512, num_kv_blocks=64))
        engine.start()
        try:
            async with _client(engine) as client:
                return await body(client, engine)
        finally:
            await engine.shutdown()

    return anyio.run(main)


def test_a_suffix_on_both_apis_is_the_fim_prompt(fim_model):
    greedy = {"max_tokens": 4, "temperature": 0, "ignore_eos": True}

    async def body(client, engine):
        tok = engine.tokenizer
        prompt = tok.encode("def f(x):\n    return", add_special_tokens=False)
        suffix = tok.encode("\n\nprint(f(2))", add_special_tokens=False)
        fim = tok.fim.ids
        ids = [fim["fim_rep"], *tok.encode("myproject\n", add_special_tokens=False)]
        ids += [fim["fim_sep"], *tok.encode("filename\n", add_special_tokens=False)]
        ids += [fim["fim_pre"], *prompt, fim["fim_suf"], *suffix, fim["fim_mid"]]
        if tok.adds_bos:
            ids = [tok.bos_token_id, *ids]
        plain = await client.post("/v1/completions", json={"prompt": ids, **greedy})
        infilled = await client.post(
            "/v1/completions",
            json={"prompt": "def f(x):\n    return", "suffix": "\n\nprint(f(2))", **greedy},
        )
        ollama = await client.post(
            "/api/generate",
            json={
                "model": engine.model_info.name,
                "prompt": "def f(x):\n    return",
                "suffix": "\n\nprint(f(2))",
                "stream": False,
                "options": {"temperature": 0, "num_predict": 4},
            },
        )
        models = await client.get("/v1/models")
        return plain.json(), infilled.json(), ollama, models.json()

    plain, infilled, ollama, models = _served(fim_model, body)
    assert infilled["choices"][0]["text"] == plain["choices"][0]["text"]
    assert infilled["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert ollama.status_code == 200, ollama.text
    assert ollama.json()["response"] == plain["choices"][0]["text"]
    assert models["data"][0]["capabilities"] == ["completion", "insert"]


def test_a_model_without_fim_tokens_answers_400_naming_them(tiny_model):
    async def body(client, engine):
        openai = await client.post("/v1/completions", json={"prompt": "a", "suffix": "b"})
        ollama = await client.post(
            "/api/generate",
            json={"model": engine.model_info.name, "prompt": "a", "suffix": "b", "stream": False},
        )
        models = await client.get("/v1/models")
        return openai, ollama, models.json()

    openai, ollama, models = _served(tiny_model, body)
    assert openai.status_code == 400 and openai.json()["error"]["param"] == "suffix"
    message = openai.json()["error"]["message"]
    assert "fill in the middle" in message and "fim_pre, fim_suf, fim_mid" in message
    assert ollama.status_code == 400 and "fim_pre" in ollama.json()["error"]
    assert models["data"][0]["capabilities"] == ["completion"]


def test_infill_is_llama_servers_endpoint_streamed_or_not(fim_model):
    prefix, suffix = "def area(r):\n    return", "\n\nprint(area(2))\n"
    extra = [{"filename": "util.py", "text": "PI = 3.14159\n"}]
    greedy = {"temperature": 0, "n_predict": 5}

    async def body(client, engine):
        tok = engine.tokenizer

        def enc(text: str) -> list[int]:
            return tok.encode(text, add_special_tokens=False)

        fim = tok.fim.ids
        ids = [fim["fim_rep"], *enc("myproject\n"), fim["fim_sep"], *enc("util.py\n")]
        ids += [*enc("PI = 3.14159\n"), fim["fim_sep"], *enc("filename\n"), fim["fim_pre"]]
        ids += [*enc(prefix), *enc(" pi"), fim["fim_suf"], *enc(suffix), fim["fim_mid"]]
        ids = [tok.bos_token_id, *ids] if tok.adds_bos else ids
        plain = await client.post(
            "/v1/completions",
            json={"prompt": ids, "max_tokens": 5, "temperature": 0, "ignore_eos": True},
        )
        fields = {"input_prefix": prefix, "input_suffix": suffix, "input_extra": extra,
                  "prompt": " pi", "cache_prompt": True, "t_max_predict_ms": 500}  # fmt: skip
        whole = await client.post("/infill", json={**fields, **greedy})
        streamed = await client.post("/infill", json={**fields, **greedy, "stream": True})
        show = await client.post("/api/show", json={"model": engine.model_info.name})
        return plain.json(), whole.json(), streamed, show.json()

    plain, whole, streamed, show = _served(fim_model, body)
    text = plain["choices"][0]["text"]
    assert whole["content"] == text and whole["stop"] is True
    assert whole["tokens_evaluated"] == plain["usage"]["prompt_tokens"]
    assert whole["tokens_predicted"] == plain["usage"]["completion_tokens"]
    assert whole["stop_type"] in ("eos", "limit") and whole["timings"]["prompt_n"] > 0
    assert "data: [DONE]" not in streamed.text
    events = [json.loads(line[6:]) for line in streamed.text.split("\n\n") if line]
    *pieces, last = events
    assert "".join(p["content"] for p in pieces) == text and not any(p["stop"] for p in pieces)
    assert last["stop"] is True and last["content"] == ""
    assert last["tokens_predicted"] == whole["tokens_predicted"]
    assert "insert" in show["capabilities"]


def test_infill_on_a_model_without_fim_tokens_is_a_400_naming_them(tiny_model):
    async def body(client, engine):
        return await client.post("/infill", json={"input_prefix": "a", "input_suffix": "b"})

    response = _served(tiny_model, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "input_prefix" and "fim_pre, fim_suf, fim_mid" in error["message"]
