"""Which rows of a step's hidden states need logits, and what for. Pure Python, no torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from llmkit.engine.sched.request import Request
from llmkit.engine.sched.scheduler import SchedulerOutput


@dataclass
class StepRows:
    """The hidden rows that need logits (``rows``), and what each group of them is for."""

    rows: list[int] = field(default_factory=list)
    # request, its first logit row (1 + its proposals' count rows)
    sample: list[tuple[Request, int]] = field(default_factory=list)
    # request, first prompt position, first logit row, number of positions
    prompt_logprobs: list[tuple[Request, int, int, int]] = field(default_factory=list)
    pool: list[tuple[Request, int, int]] = field(default_factory=list)  # request, row, count


# How many prompt-logprob entries a request has reported, or None when it wants none.
ReportedPromptLogprobs = Callable[[Request], int | None]


def plan_rows(sched: SchedulerOutput, reported: ReportedPromptLogprobs) -> StepRows:
    """The last row of each request that samples in this step, the prompt rows of requests
    that want prompt logprobs, and the rows of pooling requests.

    ``reported(req)`` is how many prompt-logprob entries ``req`` has (the first is always
    None, for the first token), or None when it wants none. Only completion 0 of ``n``
    computes them: the siblings share the prompt.
    """
    plan = StepRows()
    offset = 0
    for req, n in zip(sched.requests, sched.num_new_tokens):
        start = req.num_computed_tokens
        if req.is_pooling:
            plan.pool.append((req, offset, n))
            offset += n
            continue
        done = reported(req) if req.index == 0 else None
        if done is not None:
            first = max(done - 1, start)
            last = min(start + n, req.num_prompt_tokens - 1)
            if last > first:
                plan.prompt_logprobs.append((req, first, len(plan.rows), last - first))
                plan.rows.extend(range(offset + first - start, offset + last - start))
        if start + n == req.num_tokens_with_spec:
            # With k proposals, k + 1 rows: each proposal's check, then the token after all.
            k = len(req.spec_token_ids)
            plan.sample.append((req, len(plan.rows)))
            plan.rows.extend(range(offset + n - 1 - k, offset + n))
        offset += n
    return plan
