"""plan_rows: which hidden rows of a step need logits, without a model."""

from __future__ import annotations

from llmkit.engine.sched.request import Request
from llmkit.engine.sched.scheduler import SchedulerOutput
from llmkit.engine.sched.step_rows import plan_rows
from llmkit.sampling_params import PoolingParams, SamplingParams


def test_rows_for_sampling_prompt_logprobs_and_pooling():
    decoding = Request("d", [1, 2, 3], SamplingParams())
    decoding.output_token_ids = [4]
    decoding.num_computed_tokens = 3
    chunked = Request("c", list(range(10)), SamplingParams(prompt_logprobs=1))
    chunked.num_computed_tokens = 4  # this step computes positions 4..9, the rest of it
    pooled = Request("p", [5, 6], pooling_params=PoolingParams())
    sched = SchedulerOutput([decoding, chunked, pooled], [1, 6, 2])

    plan = plan_rows(sched, lambda req: 5 if req is chunked else None)

    # decoding: its one row samples. chunked: positions 4..8 were reported up to 4, so
    # rows for 4..8 give the logprobs of tokens 5..9, and its last row samples.
    assert plan.sample == [(decoding, 0), (chunked, 6)]
    assert plan.prompt_logprobs == [(chunked, 4, 1, 5)]
    assert plan.rows == [0, 1, 2, 3, 4, 5, 6]
    assert plan.pool == [(pooled, 7, 2)]


def test_a_chunk_that_does_not_end_the_prompt_samples_nothing():
    req = Request("r", list(range(10)), SamplingParams())
    plan = plan_rows(SchedulerOutput([req], [4]), lambda _: None)
    assert plan.rows == [] and plan.sample == []
