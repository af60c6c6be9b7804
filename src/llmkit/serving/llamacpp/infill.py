"""llama-server's /infill: its request as a completion of the model's FIM prompt
(``fim.py``), the answer and stream events in llama-server's shape."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from llmkit.protocol.llamacpp import InfillChunk, InfillRequest, InfillResponse, InfillTimings
from llmkit.protocol.llamacpp.infill import StopType
from llmkit.protocol.openai import CompletionRequest, UsageInfo
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import from_validation_error
from llmkit.serving.fim import infill
from llmkit.serving.openai import completions
from llmkit.serving.openai.completions import CompletionJob
from llmkit.serving.stream import Emit


@dataclass
class InfillJob:
    """A started /infill: the completion behind it and its clock."""

    completion: CompletionJob
    stream: bool
    start: float = field(default_factory=time.perf_counter)
    first: float | None = None


async def prepare_infill(ctx: ServingContext, req: InfillRequest, request_id: str) -> InfillJob:
    """llama-server's /infill as a completion of the model's FIM prompt."""
    max_tokens = None if req.n_predict < 0 else max(req.n_predict, 1)
    extra = [(chunk.filename, chunk.text) for chunk in req.input_extra]
    prompt = infill(
        ctx, req.input_prefix, req.input_suffix, max_tokens, "input_prefix", extra, req.prompt
    )
    fields = {
        "model": req.model,
        "prompt": prompt.token_ids,
        "max_tokens": max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "top_k": req.top_k or None,  # llama-server's 0: no top-k
        "min_p": req.min_p,
        "repetition_penalty": req.repeat_penalty,
        "presence_penalty": req.presence_penalty,
        "frequency_penalty": req.frequency_penalty,
        "seed": None if req.seed < 0 else req.seed,
        "stop": req.stop or None,
        "stream": req.stream,
        "stream_options": {"include_usage": True} if req.stream else None,
    }
    try:
        completion = CompletionRequest.model_validate(fields)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    job = await completions.prepare_completion(ctx, completion, request_id)
    return InfillJob(job, req.stream)


async def create_infill(ctx: ServingContext, job: InfillJob) -> InfillResponse:
    result = await completions.create_completion(ctx, job.completion)
    choice = result.choices[0]
    return _last(ctx, job, choice.text, choice.finish_reason, choice.stop_reason, result.usage)


async def stream_infill(ctx: ServingContext, job: InfillJob, emit: Emit) -> None:
    """An event per text delta, then the last one with ``stop`` and the counts."""
    last: dict[str, Any] = {"finish": None, "reason": None, "usage": None, "text": ""}
    predicted = [0]

    async def on_chunk(chunk: BaseModel) -> None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            last["usage"] = usage
        for choice in getattr(chunk, "choices", None) or []:
            last["finish"] = choice.finish_reason or last["finish"]
            last["reason"] = choice.stop_reason or last["reason"]
            if choice.text:
                job.first = job.first or time.perf_counter()
                last["text"] += choice.text
                predicted[0] += 1
                await emit(InfillChunk(content=choice.text, tokens_predicted=predicted[0]))

    await completions.stream_completion(ctx, job.completion, on_chunk)
    final = _last(ctx, job, last["text"], last["finish"], last["reason"], last["usage"])
    await emit(final.model_copy(update={"content": ""}))


def _last(
    ctx: ServingContext,
    job: InfillJob,
    text: str,
    finish: str | None,
    reason: int | str | None,
    usage: UsageInfo | None,
) -> InfillResponse:
    """The answer's (or a stream's last event's) fields, with llama-server's timings."""
    end = time.perf_counter()
    first = job.first or end
    prompt_n = usage.prompt_tokens if usage else len(job.completion.prompts[0].token_ids)
    predicted_n = usage.completion_tokens if usage else 0
    details = usage.prompt_tokens_details if usage else None
    prompt_ms, predicted_ms = (first - job.start) * 1e3, (end - first) * 1e3
    stop_type: StopType = (
        "none"
        if finish is None
        else "limit"
        if finish == "length"
        else "word"
        if isinstance(reason, str)
        else "eos"
    )
    return InfillResponse(
        content=text,
        model=ctx.model_name,
        tokens_predicted=predicted_n,
        tokens_evaluated=prompt_n,
        has_new_line="\n" in text,
        stop_type=stop_type,
        stopping_word=reason if isinstance(reason, str) else "",
        tokens_cached=(details.cached_tokens or 0) if details else 0,
        timings=InfillTimings(
            prompt_n=prompt_n,
            prompt_ms=prompt_ms,
            prompt_per_token_ms=prompt_ms / max(prompt_n, 1),
            prompt_per_second=prompt_n / max(prompt_ms / 1e3, 1e-9),
            predicted_n=predicted_n,
            predicted_ms=predicted_ms,
            predicted_per_token_ms=predicted_ms / max(predicted_n, 1),
            predicted_per_second=predicted_n / max(predicted_ms / 1e3, 1e-9),
        ),
    )
