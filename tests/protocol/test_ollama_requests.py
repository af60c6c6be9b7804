"""Ollama's request bodies take what their published schema allows: an integer field takes
an integral number written as a float (JSON Schema's "integer" is any number without a
fraction), as OpenAI's bodies do."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from llmkit.protocol.ollama.requests import EmbedRequest, GenerateRequest


def test_integer_fields_take_integral_floats_and_refuse_fractions():
    body = {"model": "m", "input": "x", "dimensions": 57.0}
    assert EmbedRequest.model_validate(body).dimensions == 57
    ctx = GenerateRequest.model_validate({"model": "m", "prompt": "hi", "context": [1.0, 2]})
    assert ctx.context == [1, 2]
    for bad in (57.5, "57", True, 0):
        with pytest.raises(ValidationError):
            EmbedRequest.model_validate({**body, "dimensions": bad})


def test_an_empty_stop_string_is_refused_as_the_schema_says():
    body = {"model": "m", "prompt": "hi", "options": {"stop": ""}}
    with pytest.raises(ValidationError):
        GenerateRequest.model_validate(body)
    with pytest.raises(ValidationError):
        GenerateRequest.model_validate({**body, "options": {"stop": ["a", ""]}})
    assert GenerateRequest.model_validate({**body, "options": {"stop": ["a"]}}).options
