"""Every bad request gets its status and OpenAI's error shape, and the server keeps serving."""

from __future__ import annotations

import json

import openai
import pytest

MODEL = "tiny"
MAX_MODEL_LEN = 256  # as the session server was started
LONG_PROMPT = list(range(10, 250))  # 240 token ids

CASES = {
    "top_p out of range": ("/v1/completions", {"prompt": "a", "top_p": 5}, 400, "top_p"),
    "negative temperature": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "a"}], "temperature": -1},
        400,
        "temperature",
    ),
    "n zero": ("/v1/completions", {"prompt": "a", "n": 0}, 400, "n"),
    "max_tokens zero": ("/v1/completions", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
    "max_completion_tokens zero": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 0},
        400,
        "max_completion_tokens",
    ),
    "wrong type": ("/v1/completions", {"prompt": "a", "n": "three"}, 400, "n"),
    "bad prompt shape": ("/v1/completions", {"prompt": [["a"]]}, 400, "prompt"),
    "empty prompt list": ("/v1/completions", {"prompt": []}, 400, "prompt"),
    "empty token list": ("/v1/completions", {"prompt": [[]]}, 400, "prompt"),
    "missing messages": ("/v1/chat/completions", {}, 400, "messages"),
    "bad role": (
        "/v1/chat/completions",
        {"messages": [{"role": "robot", "content": "a"}]},
        400,
        "messages",
    ),
    "image part": (
        "/v1/chat/completions",
        {
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
            ]
        },
        400,
        "messages",
    ),
    "prompt + max_tokens too long": (
        "/v1/completions",
        {"prompt": LONG_PROMPT, "max_tokens": 20},
        400,
        "prompt",
    ),
    "prompt alone too long": (
        "/v1/completions",
        {"prompt": list(range(10, 10 + MAX_MODEL_LEN))},
        400,
        "prompt",
    ),
    "stream_options without stream": (
        "/v1/completions",
        {"prompt": "a", "stream_options": {"include_usage": True}},
        400,
        "stream_options",
    ),
    "logprobs over the max": ("/v1/completions", {"prompt": "a", "logprobs": 11}, 400, "logprobs"),
    "top_logprobs over the max": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "a"}], "logprobs": True, "top_logprobs": 11},
        400,
        "top_logprobs",
    ),
    "top_logprobs without logprobs": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2},
        400,
        "top_logprobs",
    ),
    "token id out of vocabulary": ("/v1/completions", {"prompt": [1, 10**6]}, 400, "prompt"),
    "stop token out of vocabulary": (
        "/v1/completions",
        {"prompt": "a", "stop_token_ids": [10**6]},
        400,
        "stop_token_ids",
    ),
    "logit_bias key not a token id": (
        "/v1/completions",
        {"prompt": "a", "logit_bias": {"x": 1}},
        400,
        "logit_bias",
    ),
    "detokenize out of vocabulary": ("/detokenize", {"tokens": [10**6]}, 400, "tokens"),
    "logit_bias key out of vocabulary": (
        "/v1/completions",
        {"prompt": "a", "logit_bias": {"100000": 1}},
        400,
        "logit_bias",
    ),
    "stream not a boolean": ("/v1/completions", {"prompt": "a", "stream": "yes"}, 400, "stream"),
    "user message without content": (
        "/v1/chat/completions",
        {"messages": [{"role": "user"}]},
        400,
        "messages",
    ),
    "template kwargs set the messages": (
        "/tokenize",
        {"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"messages": 1}},
        400,
        "chat_template_kwargs",
    ),
    "unknown model": ("/v1/completions", {"model": "gpt-4", "prompt": "a"}, 404, "model"),
}


@pytest.mark.parametrize("path, body, status, param", CASES.values(), ids=CASES.keys())
def test_bad_request_gets_status_and_shape_then_server_still_serves(
    server, path, body, status, param
):
    with server.http() as http:
        response = http.post(path, json={"model": MODEL, **body})
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["param"] == param and error["message"]
        ok = http.post(
            "/v1/completions", json={"model": MODEL, "prompt": "still here", "max_tokens": 2}
        )
        assert ok.status_code == 200


CHAT = {"messages": [{"role": "user", "content": "a"}]}
# Every integer field of every route, with the smallest body around it.
HUGE = 2**70
INT_FIELDS = [
    *(
        ("/v1/completions", {"prompt": "a"}, field, HUGE)
        for field in (
            "n",
            "seed",
            "max_tokens",
            "logprobs",
            "best_of",
            "top_k",
            "min_tokens",
            "prompt_logprobs",
            "priority",
        )
    ),
    ("/v1/completions", {"prompt": "a"}, "stop_token_ids", [HUGE]),
    ("/v1/completions", {}, "prompt", [HUGE]),
    *(("/v1/chat/completions", CHAT, f, HUGE) for f in ("max_completion_tokens", "top_logprobs")),
    *(
        ("/v1/embeddings", {"input": "a"}, f, HUGE)
        for f in ("dimensions", "truncate_prompt_tokens")
    ),
    ("/detokenize", {}, "tokens", [HUGE]),
]


@pytest.mark.parametrize("path, body, field, value", INT_FIELDS, ids=[f[2] for f in INT_FIELDS])
def test_an_integer_beyond_64_bits_is_a_400_naming_its_field(server, path, body, field, value):
    with server.http() as http:
        response = http.post(path, json={"model": MODEL, **body, field: value})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == field


@pytest.mark.parametrize(
    "raw, param, says",
    [
        (b'"temperature": 1e999', "temperature", "finite number"),
        (b'"temperature": NaN', "temperature", "finite number"),
        (b'"temperature": -Infinity', "temperature", "finite number"),
        (b'"prompt": "a\\ud800"', None, "lone UTF-16 surrogate"),
    ],
)
def test_numbers_json_cannot_hold_and_lone_surrogates_are_400s(server, raw, param, says):
    with server.http() as http:
        body = b'{"prompt": "a", "max_tokens": 2, ' + raw + b"}"
        response = http.post(
            "/v1/completions", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and says in error["message"]


def test_top_logprobs_over_the_limit_is_named_as_sent(server):
    with server.http() as http:
        response = http.post(
            "/v1/chat/completions",
            json={**CHAT, "logprobs": True, "top_logprobs": 100, "max_tokens": 1},
        )
    error = response.json()["error"]
    assert error["param"] == "top_logprobs"
    assert error["message"].startswith("top_logprobs=100 is more than")


def test_the_widest_integers_are_served(server):
    with server.http() as http:
        for fields in (
            {"seed": 2**64 - 1, "priority": 2**63 - 1},
            {"seed": -(2**63), "priority": -(2**63), "top_k": 2**63 - 1},
        ):
            response = http.post("/v1/completions", json={"prompt": "a", "max_tokens": 2, **fields})
            assert response.status_code == 200, response.text


def test_too_long_states_both_numbers(server):
    with server.http() as http:
        error = http.post(
            "/v1/completions", json={"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 20}
        ).json()["error"]
    assert f"maximum context length is {MAX_MODEL_LEN} tokens" in error["message"]
    assert "requested 260 tokens (240 in the prompt, 20 in the completion)" in error["message"]
    assert error["code"] == "context_length_exceeded"


@pytest.mark.parametrize(
    "content, headers",
    [
        (b'{"model": "tiny", "prompt": "a"', {"content-type": "application/json"}),
        (b"[1, 2]", {"content-type": "application/json"}),
        (json.dumps({"model": "tiny", "prompt": "a"}).encode(), {"content-type": "text/plain"}),
        (b"model=tiny&prompt=a", {"content-type": "application/x-www-form-urlencoded"}),
    ],
    ids=["malformed JSON", "not an object", "text/plain", "form"],
)
def test_unparseable_bodies_are_400(server, content, headers):
    with server.http() as http:
        response = http.post("/v1/completions", content=content, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_openai_client_raises_typed_errors(client):
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model=MODEL, prompt="a", temperature=-3)
    assert bad.value.body["param"] == "temperature"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "a"}])
    assert client.completions.create(model=MODEL, prompt="a", max_tokens=1).choices


def test_api_key_required_except_on_health_and_metrics(server):
    with server.http(api_key=None) as anonymous, server.http(api_key="wrong") as wrong:
        for http in (anonymous, wrong):
            for method, path in [
                ("GET", "/v1/models"),
                ("POST", "/v1/completions"),
                ("POST", "/tokenize"),
                ("GET", "/version"),
            ]:
                response = http.request(method, path, json={"prompt": "a"})
                assert response.status_code == 401, path
                assert response.json()["error"]["code"] == "invalid_api_key"
        assert anonymous.get("/health").status_code == 200
        assert anonymous.get("/metrics").status_code == 200
    bad_client = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_client.models.list()


def test_a_401_comes_in_the_shape_of_the_path_s_api(server):
    """Anthropic's and Ollama's clients read their own error shape, OpenAI's clients OpenAI's;
    /openapi.json documents each 401 in the shape it is sent in."""
    with server.http(api_key=None) as anonymous, server.http() as http:
        messages = anonymous.post("/v1/messages", json={})
        chat = anonymous.post("/api/chat", json={})
        models = anonymous.get("/v1/models")
        document = http.get("/openapi.json").json()
    assert messages.status_code == chat.status_code == models.status_code == 401
    assert messages.json()["type"] == "error"
    assert messages.json()["error"]["type"] == "authentication_error"
    assert "API key" in chat.json()["error"]
    assert models.json()["error"]["code"] == "invalid_api_key"

    def documented(path: str, method: str) -> str:
        response = document["paths"][path][method]["responses"]["401"]
        return response["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]

    assert documented("/v1/messages", "post") == "AnthropicErrorResponse"
    assert documented("/api/chat", "post") == "ErrorBody"
    assert documented("/v1/models", "get") == "ErrorResponse"


def test_unknown_route_and_method(server):
    with server.http() as http:
        assert http.get("/v1/nothing").json()["error"]["message"]
        assert http.get("/v1/nothing").status_code == 404
        assert http.get("/v1/completions").status_code == 405
