"""serving/ conversions without a server or an engine: params, errors, logprobs, chunk shapes."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.outputs import Logprob
from llmkit.protocol.openai import (
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatStreamChoice,
    CompletionChunk,
    CompletionRequest,
    DeltaMessage,
    UsageInfo,
)
from llmkit.sampling_params import RequestOutputKind
from llmkit.serving.errors import OpenAIError, from_validation_error, naming
from llmkit.serving.logprobs import chat_logprobs, completion_logprobs, token_repr
from llmkit.serving.params import build_sampling_params, check_context_length


@pytest.fixture(scope="module")
def tokenizer(tiny_model) -> Tokenizer:
    return Tokenizer(tiny_model)


def chat(**fields) -> ChatCompletionRequest:
    return ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], **fields)


def test_sampling_params_from_a_completion_request():
    req = CompletionRequest(
        prompt="a",
        temperature=0.5,
        top_k=3,
        stop="x",
        logit_bias={"7": -100},
        seed=1,
        ignore_eos=True,
    )
    params = build_sampling_params(req, max_tokens=9, logprobs=2, prompt_logprobs=None)
    assert (params.temperature, params.top_k, params.stop, params.max_tokens) == (0.5, 3, ["x"], 9)
    assert params.logit_bias == {7: -100.0} and params.ignore_eos and params.logprobs == 2
    assert params.output_kind is RequestOutputKind.DELTA  # streams and joins alike


def test_defaults_follow_openai():
    params = build_sampling_params(
        CompletionRequest(prompt="a"),
        max_tokens=16,
        logprobs=None,
        prompt_logprobs=None,
    )
    assert (params.temperature, params.top_p, params.n, params.max_tokens) == (1.0, 1.0, 1, 16)


@pytest.mark.parametrize(
    "fields, max_tokens, renames, param",
    [
        ({}, 0, {"max_tokens": "max_completion_tokens"}, "max_completion_tokens"),
        ({"min_tokens": 9}, 4, {}, "min_tokens"),
        ({"logit_bias": {"x": 1}}, None, {}, "logit_bias"),
    ],
)
def test_invalid_values_name_the_request_parameter(fields, max_tokens, renames, param):
    with pytest.raises(OpenAIError) as err, naming(renames):
        build_sampling_params(
            chat(**fields),
            max_tokens=max_tokens,
            logprobs=None,
            prompt_logprobs=None,
        )
    assert err.value.status == 400 and err.value.param == param


def test_chat_logprobs_errors_name_top_logprobs():
    with pytest.raises(OpenAIError) as err, naming({"logprobs": "top_logprobs"}):
        build_sampling_params(chat(), max_tokens=None, logprobs=-1, prompt_logprobs=None)
    assert err.value.param == "top_logprobs"
    assert err.value.message == "top_logprobs must be non-negative, got -1"


def test_context_length_error_states_both_numbers():
    check_context_length(100, 28, 128, "prompt")  # exactly fits
    with pytest.raises(OpenAIError) as err:
        check_context_length(100, 29, 128, "messages")
    assert "maximum context length is 128 tokens" in err.value.message
    assert "129 tokens (100 in the messages, 29 in the completion)" in err.value.message
    assert (err.value.param, err.value.code) == ("messages", "context_length_exceeded")


def test_the_http_app_and_the_engine_keep_one_context_rule():
    """The 400 says what the engine's ValueError says; unset max_tokens is the rest."""
    from llmkit.engine.sched.context_window import completion_budget

    with pytest.raises(OpenAIError) as http:
        check_context_length(100, 29, 128, "prompt")
    with pytest.raises(ValueError, match="129 tokens") as engine:
        completion_budget(100, 29, 128)
    assert http.value.message == str(engine.value)
    assert completion_budget(100, None, 128) == 28
    with pytest.raises(ValueError, match="your prompt resulted in 128 tokens"):
        completion_budget(128, None, 128)


def test_error_body_shape():
    body = OpenAIError(404, "no such model", "model", "model_not_found").body().model_dump()
    assert body == {
        "error": {
            "message": "no such model",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    }
    assert OpenAIError(500, "boom").body().error.type == "server_error"


def test_validation_errors_name_the_field():
    with pytest.raises(ValidationError) as exc:
        CompletionRequest.model_validate({"prompt": {"not": "a prompt"}})
    error = from_validation_error(exc.value)
    assert (
        error.param == "prompt"
        and "str or list[str] or list[int] or list[list[int]]" in error.message
    )
    with pytest.raises(ValidationError) as exc:
        ChatCompletionRequest.model_validate(
            {"messages": [{"role": "user", "content": "a"}], "n": "x"}
        )
    assert from_validation_error(exc.value).param == "n"


@pytest.mark.parametrize(
    "fields, param, says",
    [
        ({"top_p": 0}, "top_p", "greater than 0"),
        ({"presence_penalty": 3}, "presence_penalty", "less than or equal to 2"),
        ({"logit_bias": {"1": 101}}, "logit_bias", "less than or equal to 100"),
        ({"stream": "yes"}, "stream", "Invalid type for 'stream': expected a boolean"),
        ({"echo": 1}, "echo", "expected a boolean, but got a number"),
        ({"temperature": float("inf")}, "temperature", "finite number"),
        ({"temperature": "0.5"}, "temperature", "expected a number, but got a string"),
        ({"max_tokens": 2**70}, "max_tokens", "less than or equal to 9223372036854775807"),
        ({"seed": 2**64}, "seed", "less than or equal to 18446744073709551615"),
        ({"top_k": True}, "top_k", "expected an integer, but got a boolean"),
        ({"messages": []}, "messages", "messages must not be empty"),
        ({"messages": [{"role": "user"}]}, "messages", "content is required in a user message"),
        ({"chat_template_kwargs": {"a": [float("nan")]}}, "chat_template_kwargs", "finite"),
    ],
)
def test_values_out_of_range_or_of_the_wrong_type_are_refused_at_parse(fields, param, says):
    body = {"messages": [{"role": "user", "content": "hi"}], **fields}
    with pytest.raises(ValidationError) as exc:
        ChatCompletionRequest.model_validate_json(json.dumps(body))
    error = from_validation_error(exc.value)
    assert (error.status, error.param) == (400, param) and says in error.message


def test_an_assistant_message_calling_tools_may_leave_out_content():
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    req = ChatCompletionRequest(messages=[{"role": "assistant", "tool_calls": [call]}])
    assert req.messages[0].content is None


def test_a_lone_surrogate_is_named_as_such():
    with pytest.raises(ValidationError) as exc:
        CompletionRequest.model_validate_json(b'{"prompt": "a\\ud800"}')
    error = from_validation_error(exc.value)
    assert "lone UTF-16 surrogate" in error.message and error.status == 400


def test_unknown_fields_are_kept_aside():
    req = CompletionRequest.model_validate({"prompt": "a", "response_format": {"type": "json"}})
    assert req.model_extra == {"response_format": {"type": "json"}}


def test_stream_chunks_carry_usage_only_when_asked():
    choice = ChatStreamChoice(index=0, delta=DeltaMessage(content="hi"))
    plain = json.loads(ChatCompletionChunk(id="c", model="m", choices=[choice]).model_dump_json())
    assert "usage" not in plain and plain["choices"][0]["delta"] == {"content": "hi"}
    with_null = json.loads(
        CompletionChunk(id="c", model="m", choices=[], usage=None).model_dump_json()
    )
    assert with_null["usage"] is None
    final = json.loads(
        CompletionChunk(
            id="c", model="m", choices=[], usage=UsageInfo(prompt_tokens=1)
        ).model_dump_json()
    )
    assert final["usage"]["prompt_tokens"] == 1 and final["object"] == "text_completion"
    role = DeltaMessage(role="assistant", content="")
    assert role.model_dump() == {"role": "assistant", "content": ""}
    assert DeltaMessage().model_dump() == {}


def position(entries: dict[int, tuple[float, int]], tokenizer) -> dict[int, Logprob]:
    return {
        tid: Logprob(lp, rank, tokenizer.token_text(tid)) for tid, (lp, rank) in entries.items()
    }


def test_completion_logprobs_lists(tokenizer):
    a, b, c = tokenizer.encode("hello world", add_special_tokens=False)[:3]
    positions = [
        None,  # a prompt's first token has no logprob
        position({b: (-0.5, 1), c: (-1.5, 2)}, tokenizer),
        position({c: (-float("inf"), 9), a: (-0.1, 1)}, tokenizer),
    ]
    lp, end = completion_logprobs(tokenizer, [a, b, c], positions, 3)
    texts = [token_repr(tokenizer, t)[0] for t in (a, b, c)]
    assert lp.tokens == texts
    assert lp.text_offset == [3, 3 + len(texts[0]), 3 + len(texts[0]) + len(texts[1])]
    assert end == lp.text_offset[-1] + len(texts[2])
    assert lp.token_logprobs == [None, -0.5, -9999.0]  # JSON has no -inf
    assert lp.top_logprobs[0] is None
    assert lp.top_logprobs[1] == {texts[1]: -0.5, texts[2]: -1.5}
    assert all(math.isfinite(v) for v in lp.top_logprobs[2].values())


def test_chat_logprobs_entries(tokenizer):
    a, b, c = tokenizer.encode("hello world", add_special_tokens=False)[:3]
    pos = position({c: (-2.0, 3), a: (-0.2, 1), b: (-1.0, 2)}, tokenizer)
    (entry,) = chat_logprobs(tokenizer, [c], [pos], top_logprobs=2)
    assert entry.token == token_repr(tokenizer, c)[0] and entry.logprob == -2.0
    assert bytes(entry.bytes).decode() == entry.token
    assert [t.logprob for t in entry.top_logprobs] == [-0.2, -1.0]
    (none,) = chat_logprobs(tokenizer, [c], [pos], top_logprobs=0)
    assert none.top_logprobs == []


def test_partial_utf8_tokens_read_as_bytes(tokenizer):
    partial = [t for t in range(tokenizer.vocab_size) if "\ufffd" in tokenizer.token_text(t)]
    names = {token_repr(tokenizer, t)[0] for t in partial}
    assert len(names) == len(partial)  # each has a name of its own
    text, raw = token_repr(tokenizer, partial[0])
    assert text == "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_an_assistants_reasoning_reaches_the_template_under_both_names(field):
    """Clients send thinking back as either; templates read one or the other (GLM's
    reasoning_content; gpt-oss's thinking, taken from either in llmkit's template)."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    from llmkit.chat.glm45 import GLM45
    from llmkit.serving.conversation import to_conversation

    request = ChatCompletionRequest(
        messages=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello.", field: "They greet me."},
        ]
    )
    turn = to_conversation(request.messages)[1]
    assert turn["reasoning"] == turn["reasoning_content"] == "They greet me."
    rendered = _compile_jinja_template(GLM45).render(messages=to_conversation(request.messages))
    assert "<think>They greet me.</think>\nHello." in rendered
