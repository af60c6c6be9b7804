"""`llmkit serve` answer flags: content format, response role, token-id logprobs, usage."""

from __future__ import annotations

import json
import re

import pytest

from serve_helpers import PARTS_MESSAGE, PARTS_TEMPLATE, STRING_TEMPLATE, rendered, template_file

TOKEN_ID = re.compile(r"^token_id:\d+$")


@pytest.fixture(scope="module")
def answers_server(module_server, tiny_model, tmp_path_factory):
    return module_server(
        tiny_model,
        "--chat-template",
        template_file(tmp_path_factory.mktemp("template")),
        "--chat-template-content-format",
        "openai",
        "--response-role",
        "narrator",
        "--return-tokens-as-token-ids",
        "--enable-force-include-usage",
        "--enable-prompt-tokens-details",
        "--max-logprobs",
        "5",
    )


def test_the_openai_content_format_passes_the_parts(answers_server):
    with answers_server.http(api_key=None) as http:
        text = rendered(http, [PARTS_MESSAGE, {"role": "assistant", "content": "ok"}])
    assert text == "user: P[red] P[blue]\nassistant: P[ok]\n"


def test_the_auto_content_format_follows_the_template(server):
    """The session's server runs with the default, auto: parts for a template that loops."""
    with server.http() as http:
        looping = rendered(http, [PARTS_MESSAGE], chat_template=PARTS_TEMPLATE)
        plain = rendered(http, [PARTS_MESSAGE], chat_template=STRING_TEMPLATE)
    assert looping == "user: P[red] P[blue]\n"
    assert plain == "user: S[red\nblue]\n"


def _events(response) -> list[dict]:
    lines = [line for line in response.text.split("\n") if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[len("data: ") :]) for line in lines[:-1]]


def test_the_response_role_names_the_message_and_the_first_delta(answers_server):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    with answers_server.http(api_key=None) as http:
        message = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
        events = _events(http.post("/v1/chat/completions", json={**body, "stream": True}))
    assert message["role"] == "narrator"
    assert events[0]["choices"][0]["delta"] == {"role": "narrator", "content": ""}


def test_without_a_generation_prompt_the_reply_continues_the_last_role(answers_server):
    """As vLLM: the response role is the server's only where a generation prompt opens a turn."""
    body = {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "so"}],
        "max_tokens": 3,
        "add_generation_prompt": False,
        "continue_final_message": True,
    }
    with answers_server.http(api_key=None) as http:
        message = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
        events = _events(http.post("/v1/chat/completions", json={**body, "stream": True}))
    assert message["role"] == "assistant"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_logprob_tokens_are_token_ids(answers_server):
    with answers_server.http(api_key=None) as http:
        completion = http.post(
            "/v1/completions",
            json={"prompt": "Once", "max_tokens": 4, "temperature": 0, "logprobs": 2},
        ).json()["choices"][0]
        chat = http.post(
            "/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
                "temperature": 0,
                "logprobs": True,
                "top_logprobs": 2,
            },
        ).json()["choices"][0]
        ids = [int(t.removeprefix("token_id:")) for t in completion["logprobs"]["tokens"]]
        text = http.post("/detokenize", json={"tokens": ids}).json()["prompt"]
    logprobs = completion["logprobs"]
    assert all(TOKEN_ID.match(t) for t in logprobs["tokens"]) and text == completion["text"]
    assert all(TOKEN_ID.match(t) for top in logprobs["top_logprobs"] for t in top)
    entries = chat["logprobs"]["content"]
    assert len(entries) == 4 and all(TOKEN_ID.match(e["token"]) for e in entries)
    assert all(TOKEN_ID.match(t["token"]) for e in entries for t in e["top_logprobs"])


def test_every_stream_ends_with_usage_and_cached_prompt_tokens(answers_server):
    # Long enough to fill whole KV blocks, so the second request finds them cached.
    prompt = "the cached prefix of a prompt " * 8
    body = {"prompt": prompt, "max_tokens": 3, "stream": True}
    with answers_server.http(api_key=None) as http:
        first = _events(http.post("/v1/completions", json=body))
        second = _events(http.post("/v1/completions", json=body))
        plain = http.post("/v1/completions", json={**body, "stream": False}).json()
    assert all(event["usage"] is None for event in first[:-1])
    usage = first[-1]["usage"]
    assert first[-1]["choices"] == [] and usage["completion_tokens"] == 3
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    cached = second[-1]["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < usage["prompt_tokens"]
    assert plain["usage"]["prompt_tokens_details"]["cached_tokens"] == cached
