"""A chat template's name means the same template wherever one is accepted: the request
field (through both engine placements, so the engine client's too), LLM.chat and
AsyncEngine.chat; what is neither a name nor a template is refused naming the field."""

from __future__ import annotations

import anyio
import pytest

from llmkit import LLM, AsyncEngine, EngineConfig, SamplingParams
from serve_helpers import rendered
from tool_helpers import TOOLS

USER = [{"role": "user", "content": "What is the weather in Paris?"}]
# The example plugin distribution's template (installed with the test dependencies).
NAME = "example_functions"


def tokenized(http, **fields) -> list[int]:
    body = {"messages": USER, **fields}
    return http.post("/tokenize", json=body).raise_for_status().json()["tokens"]


def test_the_request_field_names_a_template(server):
    with server.http() as http:
        assert rendered(http, USER, chat_template=NAME).rstrip("\n") == (
            "<s>[USER] What is the weather in Paris?"
        )
        assert rendered(http, USER, chat_template="llmkit:chatml").startswith("<|im_start|>user")
        answer = http.post(
            "/v1/chat/completions",
            json={"model": "tiny", "messages": USER, "max_tokens": 1, "chat_template": NAME},
        ).raise_for_status()
        assert answer.json()["usage"]["prompt_tokens"] == len(tokenized(http, chat_template=NAME))


@pytest.mark.parametrize(
    ("value", "says"),
    [("acme-chat", "neither an installed chat template"), ("{% if %}", "does not compile")],
)
@pytest.mark.parametrize("path", ["/tokenize", "/v1/chat/completions"])
def test_neither_a_name_nor_a_template_is_a_400_naming_the_field(server, value, says, path):
    with server.http() as http:
        body = {"model": "tiny", "messages": USER, "max_tokens": 1, "chat_template": value}
        answer = http.post(path, json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "chat_template" and says in error["message"]


def test_tokenize_shows_how_the_template_renders_tools(server):
    with server.http() as http:
        prompt = rendered(
            http, USER, chat_template=NAME, tools=TOOLS, chat_template_kwargs={"system": "Hi."}
        )
    assert prompt.startswith("<s>[SYSTEM] Hi.\n[TOOLS] Call a function as <function=NAME>")
    assert "get_weather(" in prompt and "get_time(" in prompt
    with server.http() as http:
        answer = http.post("/tokenize", json={"messages": USER, "tools": [{"type": "function"}]})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "tools"


def test_llm_and_async_engine_render_the_named_template(in_process_server, tiny_model):
    with in_process_server.http() as http:
        want = tokenized(http, chat_template=NAME, tools=TOOLS)
    params = SamplingParams(max_tokens=1)
    llm = LLM(tiny_model, max_model_len=1024)
    out = llm.chat(USER, params, chat_template=NAME, tools=TOOLS, use_tqdm=False)[0]
    assert out.prompt_token_ids == want
    with pytest.raises(ValueError, match="chat_template 'acme-chat' is neither"):
        llm.chat(USER, params, chat_template="acme-chat", use_tqdm=False)
    del llm

    async def engine_chat() -> list[int]:
        async with AsyncEngine(EngineConfig(tiny_model, max_model_len=1024)) as engine:
            async for output in engine.chat(USER, params, chat_template=NAME, tools=TOOLS):
                return output.prompt_token_ids
        raise AssertionError("no output")

    assert anyio.run(engine_chat) == want
