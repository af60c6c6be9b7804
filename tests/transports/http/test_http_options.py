"""create_app's option objects check their values where they are made."""

from __future__ import annotations

import pytest

from llmkit.http import AccessOptions, HTTPOptions


def test_zero_turns_a_limit_off_and_a_negative_one_is_refused():
    off = HTTPOptions(max_request_body_bytes=0, request_body_timeout_s=0, sse_keepalive_s=0)
    assert (off.max_request_body_bytes, off.request_body_timeout_s, off.sse_keepalive_s) == (
        None,
        None,
        None,
    )
    with pytest.raises(ValueError, match="sse_keepalive_s must be >= 0"):
        HTTPOptions(sse_keepalive_s=-1)


def test_one_key_or_several():
    assert AccessOptions(api_key="k").keys == ["k"]
    assert AccessOptions(api_key=["a", "b"]).keys == ["a", "b"]
    assert AccessOptions().keys == []
