"""LiteLLM, as apps call an OpenAI-compatible server, maps the server's errors to its own:
a wrong key is an AuthenticationError, a bad parameter a BadRequestError."""

from __future__ import annotations

import os

import pytest

# The bundled cost map, not the one LiteLLM would fetch: tests reach no network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

MODEL = "tiny"  # the session server's model name and key (conftest)
API_KEY = "test-key"
MESSAGES = [{"role": "user", "content": "hi"}]


def complete(server, api_key: str, **fields):
    return litellm.completion(
        model=f"openai/{MODEL}",
        api_base=server.base_url,
        api_key=api_key,
        messages=MESSAGES,
        max_tokens=2,
        num_retries=0,
        **fields,
    )


def test_a_wrong_key_is_an_authentication_error(server):
    with pytest.raises(litellm.AuthenticationError) as exc:
        complete(server, "wrong")
    assert "Incorrect API key provided: wr***ng" in str(exc.value)


def test_a_bad_parameter_is_a_bad_request_and_a_good_call_answers(server):
    with pytest.raises(litellm.BadRequestError) as exc:
        complete(server, API_KEY, temperature=-3)
    assert "temperature" in str(exc.value)
    assert complete(server, API_KEY).choices[0].message.content is not None
