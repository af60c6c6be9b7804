"""ParamError: bad input that names the parameter to blame, in Python and across processes."""

from __future__ import annotations

import pickle

import pytest

from llmkit import ParamError, SamplingParams


def test_a_bad_field_is_a_value_error_naming_it():
    with pytest.raises(ParamError) as bad:
        SamplingParams(top_p=2)
    assert isinstance(bad.value, ValueError)
    assert bad.value.param == "top_p" and str(bad.value).startswith("top_p ")


def test_it_crosses_a_pickle_and_takes_the_callers_name():
    exc = pickle.loads(pickle.dumps(ParamError("logprobs", "logprobs=30 is too many")))
    assert (exc.param, str(exc)) == ("logprobs", "logprobs=30 is too many")
    renamed = exc.renamed({"logprobs": "top_logprobs"})
    assert (renamed.param, str(renamed)) == ("top_logprobs", "top_logprobs=30 is too many")
    assert exc.renamed({"n": "best_of"}) is exc
