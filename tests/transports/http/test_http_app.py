"""create_app in process (httpx ASGI transport), on asyncio and trio: failures, health, mounting."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from llmkit import AsyncEngine, EngineConfig
from llmkit.http import AccessOptions, AppOptions, HTTPOptions, create_app


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def engine(tiny_model):
    # Long enough for requests that run for seconds (2000 tokens), on a small KV cache.
    engine = AsyncEngine(EngineConfig(model=tiny_model, max_model_len=2048, num_kv_blocks=512))
    engine.start()  # each request's stream binds to whichever event loop reads it
    yield engine
    anyio.run(engine.shutdown)


def client_for(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def sse_events(body: str) -> list:
    return [
        line[len("data: ") :] if line == "data: [DONE]" else json.loads(line[len("data: ") :])
        for line in body.split("\n\n")
        if line
    ]


@pytest.mark.anyio
async def test_engine_failure_mid_stream_sends_an_error_event_then_done(engine, fail_next_step):
    async with client_for(create_app(engine)) as client:
        fail_next_step(engine, RuntimeError("injected failure"))
        response = await client.post(
            "/v1/completions", json={"prompt": "hello", "max_tokens": 5, "stream": True}
        )
        assert response.status_code == 200
        *_, error, done = sse_events(response.text)
        assert done == "[DONE]"
        assert (
            error["error"]["type"] == "server_error"
            and "injected failure" in error["error"]["message"]
        )

        fail_next_step(engine, RuntimeError("injected failure"))
        response = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 5})
        assert response.status_code == 500 and response.json()["error"]["type"] == "server_error"

        ok = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 5})
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 5


@pytest.mark.anyio
async def test_health_is_503_while_draining(engine):
    app = create_app(engine)
    async with client_for(app) as client:
        assert (await client.get("/health")).status_code == 200
        app.state.serving.draining = True
        assert (await client.get("/health")).status_code == 503
        refused = await client.post("/v1/completions", json={"prompt": "a"})
        assert refused.status_code == 503


@pytest.mark.anyio
async def test_closing_ends_what_runs_in_a_mounted_app_with_the_shutdown_error(engine):
    app = create_app(engine)
    outer = Starlette(routes=[Mount("/llm", app=app)])
    endless = {"prompt": "on and on", "max_tokens": 2000, "ignore_eos": True}
    answers: dict[str, httpx.Response] = {}

    async def post(name: str, body: dict) -> None:
        answers[name] = await client.post("/llm/v1/completions", json=body)

    async with client_for(outer) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(post, "stream", {**endless, "stream": True})
            tg.start_soon(post, "whole", endless)
            while engine.stats().num_running < 2:
                await anyio.sleep(0.01)
            # What the outer app's server does at its shutdown deadline (a mount has no
            # lifespan of its own).
            app.state.serving.closing.set()
        refused = await client.post("/llm/v1/completions", json=endless)
    *_, error, done = sse_events(answers["stream"].text)
    assert done == "[DONE]" and error["error"]["type"] == "service_unavailable"
    assert "shutting down" in error["error"]["message"]
    assert answers["whole"].status_code == 503 and answers["whole"].json() == error
    assert refused.status_code == 503 and "no new requests" in refused.json()["error"]["message"]
    with anyio.fail_after(5):  # both engine requests were aborted
        while engine.stats().num_running:
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_mounted_under_a_prefix_with_api_key(engine):
    outer = Starlette(
        routes=[
            Mount(
                "/llm",
                app=create_app(
                    engine,
                    AppOptions(access=AccessOptions(api_key=["k1", "k2"])),
                    served_model_name="m",
                ),
            )
        ]
    )
    async with client_for(outer) as client:
        assert (await client.get("/llm/health")).status_code == 200
        assert (await client.get("/llm/v1/models")).status_code == 401
        models = await client.get("/llm/v1/models", headers={"Authorization": "Bearer k2"})
        assert [m["id"] for m in models.json()["data"]] == ["m"]


@pytest.mark.anyio
async def test_the_chat_page_is_off_unless_asked_and_needs_no_key(engine):
    async with client_for(create_app(engine)) as client:
        assert (await client.get("/")).status_code == 404
    outer = Starlette(
        routes=[
            Mount(
                "/llm",
                app=create_app(engine, AppOptions(access=AccessOptions(api_key="k"), ui=True)),
            )
        ]
    )
    async with client_for(outer) as client:
        page = await client.get("/llm/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        # Relative URLs, so that the page works under any prefix.
        assert 'src="ui/app.js"' in page.text and 'href="ui/style.css"' in page.text
        script = await client.get("/llm/ui/app.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert "script-src 'self'" in script.headers["content-security-policy"]
        assert (await client.get("/llm/ui/style.css")).status_code == 200
        assert (await client.get("/llm/ui/other.js")).status_code == 401
        assert (await client.get("/llm/v1/models")).status_code == 401


@pytest.mark.anyio
async def test_metrics_count_finished_requests_and_tokens(engine):
    async with client_for(
        create_app(
            engine, AppOptions(access=AccessOptions(api_key="k", metrics_require_api_key=True))
        )
    ) as client:
        assert (await client.get("/metrics")).status_code == 401
        for _ in range(2):
            await client.post(
                "/v1/chat/completions",
                headers={"Authorization": "Bearer k"},
                json={
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 4,
                    "ignore_eos": True,
                },
            )
        text = (await client.get("/metrics", headers={"Authorization": "Bearer k"})).text
    assert 'llmkit:request_success_total{finished_reason="length"} 2.0' in text
    assert "llmkit:time_to_first_token_seconds_count 2.0" in text
    assert "llmkit:inter_token_latency_seconds_count 6.0" in text
    assert "llmkit:generation_tokens_total" in text and "llmkit:prefix_cache_hit_rate" in text
    for series in ('queried_tokens_total{tier="disk"}', 'hit_tokens_total{tier="host"}'):
        assert f"llmkit:prompt_cache_{series}" in text
    assert 'llmkit:prompt_cache_bytes{tier="host"}' in text


def test_health_is_503_once_the_engine_is_dead(tiny_model):
    async def main() -> None:
        engine = AsyncEngine(EngineConfig(model=tiny_model))
        async with engine:
            pass
        async with client_for(create_app(engine)) as client:
            assert (await client.get("/health")).status_code == 503
            response = await client.post("/v1/completions", json={"prompt": "a"})
            assert response.status_code == 503

    anyio.run(main)


@pytest.mark.anyio
async def test_prompts_stay_out_of_the_log_unless_asked(engine, caplog):
    secret = "my secret prompt text"
    caplog.set_level("INFO", logger="llmkit")
    async with client_for(create_app(engine)) as client:
        await client.post("/v1/completions", json={"prompt": secret, "max_tokens": 1})
    assert "request cmpl-" in caplog.text and secret not in caplog.text
    caplog.clear()
    async with client_for(
        create_app(engine, AppOptions(http=HTTPOptions(log_prompts=True, max_log_len=10)))
    ) as client:
        await client.post("/v1/completions", json={"prompt": secret, "max_tokens": 1})
    assert repr(secret)[:10] + "..." in caplog.text and secret not in caplog.text


@pytest.mark.anyio
async def test_server_chat_template(engine):
    template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %}"
    async with client_for(create_app(engine, AppOptions(chat_template=template))) as client:
        response = await client.post(
            "/tokenize",
            json={"messages": [{"role": "user", "content": "hi"}], "return_token_strs": True},
        )
    assert "".join(response.json()["token_strs"]) == "[user] hi"
