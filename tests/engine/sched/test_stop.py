"""Stop conditions, checked without a model: tokens, strings, min_tokens, lengths."""

from __future__ import annotations

from llmkit.engine.sched.request import Request, RequestStatus
from llmkit.engine.sched.stop import Stop, check_stop
from llmkit.sampling_params import SamplingParams

EOS = 2


def _after(outputs: list[int], max_tokens: int = 100, **params) -> Request:
    req = Request("r", [5, 6, 7], SamplingParams(**params), eos_token_id=EOS, max_tokens=max_tokens)
    req.output_token_ids = list(outputs)
    return req


def _check(req: Request, stop_string: str | None = None, max_model_len: int = 1000):
    calls: list[bool] = []

    def detokenize(can_stop: bool) -> str | None:
        calls.append(can_stop)
        return stop_string if can_stop else None

    return check_stop(req, req.output_token_ids[-1], detokenize, max_model_len), calls


def test_eos_stops_without_a_reason_and_its_text_is_not_added():
    stop, calls = _check(_after([9, EOS]))
    assert stop == Stop(RequestStatus.FINISHED_STOPPED, None) and calls == []


def test_eos_is_ignored_when_asked():
    stop, calls = _check(_after([9, EOS], ignore_eos=True))
    assert stop is None and calls == [True]


def test_a_stop_token_is_the_reason_and_its_text_is_kept_only_if_asked():
    assert _check(_after([9, 11], stop_token_ids=[11])) == (
        Stop(RequestStatus.FINISHED_STOPPED, 11),
        [],
    )
    stop, calls = _check(_after([9, 11], stop_token_ids=[11], include_stop_str_in_output=True))
    assert stop == Stop(RequestStatus.FINISHED_STOPPED, 11) and calls == [True]


def test_a_stop_string_is_the_reason():
    stop, _ = _check(_after([9, 10], stop=["ab"]), stop_string="ab")
    assert stop == Stop(RequestStatus.FINISHED_STOPPED, "ab")


def test_nothing_but_length_stops_before_min_tokens():
    stop, calls = _check(_after([EOS], min_tokens=2, stop=["x"]), stop_string="x")
    assert stop is None and calls == [False]
    stop, _ = _check(_after([EOS], max_tokens=1, min_tokens=1))
    assert stop == Stop(RequestStatus.FINISHED_STOPPED)


def test_length_limits():
    assert _check(_after([9, 9], max_tokens=2))[0] == Stop(RequestStatus.FINISHED_LENGTH)
    assert _check(_after([9], max_tokens=5), max_model_len=4)[0] == Stop(
        RequestStatus.FINISHED_LENGTH
    )
    assert _check(_after([9], max_tokens=5), max_model_len=5)[0] is None
