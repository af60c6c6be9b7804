"""The OpenAI API through a real `llmkit serve`, driven by the official openai client."""

from __future__ import annotations

import pytest

from llmkit.model.demo import SPECIAL_TOKENS

MODEL = "tiny"  # the name the session server serves the model under

GREEDY = dict(temperature=0.0, max_tokens=24)
SPECIAL_TOKENS = set(SPECIAL_TOKENS)


def test_completion_stream_equals_non_stream(client):
    full = client.completions.create(model=MODEL, prompt="The quick brown fox", **GREEDY)
    chunks = list(
        client.completions.create(model=MODEL, prompt="The quick brown fox", stream=True, **GREEDY)
    )
    assert "".join(c.choices[0].text for c in chunks) == full.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == [
        full.choices[0].finish_reason
    ]
    assert full.object == "text_completion" and full.model == MODEL
    assert full.id.startswith("cmpl-")


@pytest.mark.anyio
async def test_chat_stream_equals_non_stream(async_client):
    messages = [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}],
        },
    ]
    full = await async_client.chat.completions.create(model=MODEL, messages=messages, **GREEDY)
    stream = await async_client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, **GREEDY
    )
    chunks = [c async for c in stream]
    deltas = [c.choices[0].delta for c in chunks]
    assert deltas[0].role == "assistant" and deltas[0].content == ""
    assert all(d.role is None for d in deltas[1:])
    assert "".join(d.content or "" for d in deltas) == full.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason]
    assert finishes == [full.choices[0].finish_reason]
    assert full.choices[0].message.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.usage is None for c in chunks)


def test_usage_counts_prompt_and_completion_tokens(client, server):
    prompt = "Count these tokens please"
    with server.http() as http:
        prompt_tokens = http.post("/tokenize", json={"model": MODEL, "prompt": prompt}).json()[
            "count"
        ]
    full = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=7, extra_body={"ignore_eos": True}
    )
    assert (full.usage.prompt_tokens, full.usage.completion_tokens, full.usage.total_tokens) == (
        prompt_tokens,
        7,
        prompt_tokens + 7,
    )
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt=prompt,
            max_tokens=7,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    *body, last = chunks
    assert all(c.usage is None for c in body)
    assert last.choices == [] and last.usage.model_dump(
        include={"prompt_tokens", "completion_tokens"}
    ) == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 7,
    }


def test_continuous_usage_stats_grow_chunk_by_chunk(client):
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="Counting",
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
            extra_body={"ignore_eos": True},
        )
    )
    counts = [c.usage.completion_tokens for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 6
    assert chunks[-1].choices == []


def test_n3_with_seed_gives_three_indexed_choices(client):
    kwargs = dict(
        model=MODEL, prompt="Once upon a time", n=3, seed=7, temperature=1.0, max_tokens=12
    )
    first = client.completions.create(**kwargs)
    again = client.completions.create(**kwargs)
    assert [c.index for c in first.choices] == [0, 1, 2]
    assert [c.text for c in first.choices] == [c.text for c in again.choices]
    assert len({c.text for c in first.choices}) > 1

    finished: dict[int, int] = {}
    texts = {0: "", 1: "", 2: ""}
    for chunk in client.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            texts[choice.index] += choice.text
            if choice.finish_reason:
                finished[choice.index] = finished.get(choice.index, 0) + 1
    assert finished == {0: 1, 1: 1, 2: 1}
    assert [texts[i] for i in range(3)] == [c.text for c in first.choices]


def test_multiple_prompts_get_consecutive_indices(client):
    result = client.completions.create(model=MODEL, prompt=["Hello", "World"], n=2, **GREEDY)
    assert [c.index for c in result.choices] == [0, 1, 2, 3]
    assert result.choices[0].text == result.choices[1].text  # greedy: both choices agree
    by_ids = client.completions.create(
        model=MODEL, prompt=[[1, 200, 300], [1, 400]], stream=True, **GREEDY
    )
    texts = {0: "", 1: ""}
    for chunk in by_ids:
        texts[chunk.choices[0].index] += chunk.choices[0].text
    single = client.completions.create(model=MODEL, prompt=[1, 400], **GREEDY)
    assert texts[1] == single.choices[0].text


@pytest.mark.parametrize("k, sizes", [(0, {1}), (5, {5, 6})])
def test_completion_logprobs_have_k_or_k_plus_1_entries(client, k, sizes):
    result = client.completions.create(model=MODEL, prompt="Logprobs of", logprobs=k, **GREEDY)
    lp = result.choices[0].logprobs
    assert (
        len(lp.tokens)
        == len(lp.token_logprobs)
        == len(lp.top_logprobs)
        == len(lp.text_offset)
        == 24
    )
    assert {len(top) for top in lp.top_logprobs} <= sizes
    assert all(
        top[token] == logprob
        for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)
    )
    assert [b - a for a, b in zip(lp.text_offset, lp.text_offset[1:])] == [
        len(t) for t in lp.tokens[:-1]
    ]


def test_streamed_logprobs_match_non_streamed(client):
    full = client.completions.create(model=MODEL, prompt="Stream me", logprobs=2, **GREEDY)
    tokens, offsets = [], []
    for chunk in client.completions.create(
        model=MODEL, prompt="Stream me", logprobs=2, stream=True, **GREEDY
    ):
        if chunk.choices[0].logprobs:
            tokens += chunk.choices[0].logprobs.tokens
            offsets += chunk.choices[0].logprobs.text_offset
    assert tokens == full.choices[0].logprobs.tokens
    assert offsets == full.choices[0].logprobs.text_offset


def test_echo_with_logprobs_starts_with_the_prompt(client, server):
    prompt = "Echo this prompt"
    result = client.completions.create(model=MODEL, prompt=prompt, echo=True, logprobs=1, **GREEDY)
    choice = result.choices[0]
    assert choice.text.startswith(prompt) and len(choice.text) > len(prompt)
    with server.http() as http:
        prompt_ids = http.post("/tokenize", json={"prompt": prompt}).json()["tokens"]
    lp = choice.logprobs
    assert len(lp.tokens) == len(prompt_ids) + 24
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(v is not None for v in lp.token_logprobs[1:])
    streamed = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model=MODEL, prompt=prompt, echo=True, stream=True, **GREEDY
        )
    )
    assert streamed == choice.text


@pytest.mark.anyio
async def test_chat_logprobs_in_openai_shape(async_client):
    result = await async_client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        logprobs=True,
        top_logprobs=5,
        **GREEDY,
    )
    content = result.choices[0].logprobs.content
    assert len(content) == 24
    for entry in content:
        assert len(entry.top_logprobs) == 5
        assert len({top.token for top in entry.top_logprobs}) == 5
        if not entry.token.startswith("bytes:"):  # part of a UTF-8 character
            assert bytes(entry.bytes).decode("utf-8") == entry.token
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[-1].logprob
        assert entry.logprob <= entry.top_logprobs[0].logprob + 1e-6
    # The bytes of the tokens add up to the text, up to how invalid UTF-8 is replaced
    # (special tokens are left out of the text).
    raw = b"".join(bytes(e.bytes) for e in content if e.token not in SPECIAL_TOKENS)
    text = result.choices[0].message.content
    assert raw.decode("utf-8", "ignore") == text.replace("\ufffd", "")


@pytest.mark.anyio
async def test_chat_n2_streams_role_then_content_per_choice(async_client):
    stream = await async_client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        n=2,
        seed=3,
        max_tokens=8,
        stream=True,
    )
    seen: dict[int, list] = {0: [], 1: []}
    async for chunk in stream:
        (choice,) = chunk.choices
        seen[choice.index].append(choice)
    for choices in seen.values():
        assert choices[0].delta.role == "assistant"
        assert [c.finish_reason for c in choices if c.finish_reason] == ["length"]


def test_chat_echo_and_continue_final_message(client):
    messages = [{"role": "user", "content": "Say"}, {"role": "assistant", "content": "Sure,"}]
    result = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=5,
        temperature=0.0,
        extra_body={"echo": True, "continue_final_message": True, "add_generation_prompt": False},
    )
    assert result.choices[0].message.content.startswith("Sure,")


def test_stop_string_and_max_completion_tokens(client):
    text = (
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "go"}],
            max_completion_tokens=12,
            temperature=0.0,
        )
        .choices[0]
        .message.content
    )
    stop = text[3:6]
    result = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "go"}],
        max_completion_tokens=12,
        temperature=0.0,
        stop=[stop],
    )
    assert result.choices[0].finish_reason == "stop"
    assert result.choices[0].message.content == text[: text.index(stop)]


def test_vllm_extra_fields_are_accepted(client):
    result = client.completions.create(
        model="also-tiny",
        prompt="Extras",
        max_tokens=5,
        extra_body={
            "top_k": 5,
            "min_p": 0.05,
            "repetition_penalty": 1.1,
            "min_tokens": 5,
            "ignore_eos": True,
            "stop_token_ids": [2],
            "skip_special_tokens": True,
            "priority": 1,
            "some_future_field": 1,
        },
        user="someone",
        presence_penalty=0.5,
        frequency_penalty=0.5,
        logit_bias={"5": -100},
    )
    assert result.usage.completion_tokens == 5 and result.model == "also-tiny"


def test_models_tokenize_detokenize_version(client, server):
    assert [m.id for m in client.models.list().data] == [MODEL, "also-tiny"]
    with server.http() as http:
        tokens = http.post(
            "/tokenize", json={"prompt": "hello world", "return_token_strs": True}
        ).json()
        assert tokens["count"] == len(tokens["tokens"]) and tokens["max_model_len"] == 256
        text = http.post("/detokenize", json={"tokens": tokens["tokens"]}).json()["prompt"]
        assert text.endswith("hello world") and "".join(tokens["token_strs"]) == text
        chat = http.post("/tokenize", json={"messages": [{"role": "user", "content": "hi"}]}).json()
        assert chat["count"] > 2
        assert http.get("/version").json()["version"]


def test_an_empty_model_name_is_the_default_model_as_the_document_says(server):
    """As vLLM takes it: "" names the default model, like no name."""
    with server.http() as http:
        ids = http.post("/detokenize", json={"model": "", "tokens": [5, 6]})
        assert ids.status_code == 200, ids.text
        done = http.post("/v1/completions", json={"model": "", "prompt": "hi", "max_tokens": 2})
        assert done.status_code == 200 and done.json()["model"] == MODEL
        schema = http.get("/openapi.json").json()["components"]["schemas"]["DetokenizeRequest"]
        assert "" in schema["properties"]["model"]["anyOf"][0]["enum"]


def test_request_id_is_echoed_or_made_up(server):
    with server.http() as http:
        given = http.get("/v1/models", headers={"X-Request-Id": "my-id-1"})
        made = http.get("/v1/models")
    assert given.headers["x-request-id"] == "my-id-1"
    assert len(made.headers["x-request-id"]) >= 16


def test_cors_preflight_and_headers(server):
    with server.http(api_key=None) as http:
        preflight = http.options(
            "/v1/completions",
            headers={"Origin": "http://example.com", "Access-Control-Request-Method": "POST"},
        )
        other = http.get("/health", headers={"Origin": "http://evil.example"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://example.com"
    assert "access-control-allow-origin" not in other.headers
