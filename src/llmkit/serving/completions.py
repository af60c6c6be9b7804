"""/v1/completions: a request -> engine prompts and params; outputs -> a response or chunks."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmkit.outputs import CompletionOutput, PositionLogprobs, RequestOutput
from llmkit.protocol.openai import (
    CompletionChoice,
    CompletionChunk,
    CompletionLogprobs,
    CompletionRequest,
    CompletionResponse,
    UsageInfo,
)
from llmkit.sampling_params import SamplingParams
from llmkit.serving.context import ServingContext
from llmkit.serving.engine_calls import EnginePrompt, run_prompts
from llmkit.serving.errors import bad_request
from llmkit.serving.logprobs import completion_logprobs
from llmkit.serving.params import (
    build_sampling_params,
    check_context_length,
    check_logprobs,
    check_stream_options,
    check_with_engine,
)
from llmkit.serving.stream import Emit, usage_kwargs


@dataclass
class CompletionJob:
    """A checked completion request, ready to run."""

    request_id: str
    model: str
    prompts: list[EnginePrompt]
    params: SamplingParams
    echo: bool
    logprobs: int | None
    stream: bool
    include_usage: bool
    continuous_usage: bool
    priority: int


def prepare_completion(ctx: ServingContext, req: CompletionRequest, request_id: str) -> CompletionJob:
    """Check everything and tokenize; raises OpenAIError before anything reaches the engine."""
    model = ctx.admit(req, request_id, "generate")
    check_stream_options(req)
    if req.suffix:
        raise bad_request("suffix is not supported", "suffix")
    if req.best_of is not None and req.best_of != req.n:
        raise bad_request(f"best_of must equal n ({req.n}) if given, got {req.best_of}", "best_of")
    limit = ctx.engine.config.max_logprobs
    check_logprobs(req.logprobs, limit, "logprobs")
    check_logprobs(req.prompt_logprobs, limit, "prompt_logprobs")
    prompts = _tokenize(ctx, req.prompt)
    max_model_len = ctx.engine.max_model_len
    for prompt in prompts:
        check_context_length(len(prompt.token_ids), req.max_tokens, max_model_len, "prompt")
    prompt_logprobs = req.prompt_logprobs
    if req.echo and req.logprobs is not None:
        # An echoed prompt comes with its own logprobs, as OpenAI's API returns them.
        prompt_logprobs = max(prompt_logprobs or 0, req.logprobs)
    params = build_sampling_params(
        req, max_tokens=req.max_tokens, logprobs=req.logprobs, prompt_logprobs=prompt_logprobs,
        renames={},
    )
    for prompt in prompts:
        check_with_engine(ctx.engine.processor, params, len(prompt.token_ids), {})
    ctx.log_request(request_id, req.prompt, sum(len(p.token_ids) for p in prompts), params)
    options = req.stream_options
    return CompletionJob(
        request_id=request_id,
        model=model,
        prompts=prompts,
        params=params,
        echo=req.echo,
        logprobs=req.logprobs,
        stream=req.stream,
        include_usage=bool(options and options.include_usage),
        continuous_usage=bool(options and options.include_usage and options.continuous_usage_stats),
        priority=req.priority,
    )


def _tokenize(ctx: ServingContext, prompt: str | list) -> list[EnginePrompt]:
    if isinstance(prompt, list) and not prompt:
        raise bad_request("prompt must not be empty", "prompt")
    items = [prompt] if isinstance(prompt, str) or isinstance(prompt[0], int) else prompt
    prompts = []
    for item in items:
        try:
            text, ids = ctx.engine.processor.tokenize(item)
        except ValueError as exc:
            raise bad_request(str(exc), "prompt") from None
        prompts.append(EnginePrompt(text, ids))
    return prompts


def _prompt_text(ctx: ServingContext, prompt: EnginePrompt) -> str:
    if prompt.text is not None:
        return prompt.text
    return ctx.engine.tokenizer.decode(prompt.token_ids)


@dataclass
class _Choice:
    """A choice's deltas, joined for a non-streamed response."""

    prompt_index: int
    text: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None

    def add(self, out: CompletionOutput) -> None:
        self.text.append(out.text)
        self.token_ids.extend(out.token_ids)
        self.logprobs.extend(out.logprobs or ())
        self.finish_reason = out.finish_reason
        self.stop_reason = out.stop_reason


async def create_completion(ctx: ServingContext, job: CompletionJob) -> CompletionResponse:
    """Run to the end and answer with one response."""
    n = job.params.n
    choices = [_Choice(i // n) for i in range(len(job.prompts) * n)]
    prompt_logprobs: list[list[PositionLogprobs | None] | None] = [None] * len(job.prompts)

    async def handle(i: int, out: RequestOutput) -> None:
        if out.prompt_logprobs is not None:
            prompt_logprobs[i] = out.prompt_logprobs
        for o in out.outputs:
            choices[i * n + o.index].add(o)

    await run_prompts(ctx, job.request_id, job.prompts, job.params, job.priority, handle)
    tokenizer = ctx.engine.tokenizer
    result = []
    for index, choice in enumerate(choices):
        prompt = job.prompts[choice.prompt_index]
        text = "".join(choice.text)
        logprobs = None
        if job.logprobs is not None:
            logprobs, offset = CompletionLogprobs(), 0
            if job.echo:
                positions = prompt_logprobs[choice.prompt_index] or [None] * len(prompt.token_ids)
                _, offset = completion_logprobs(tokenizer, prompt.token_ids, positions, 0, logprobs)
            completion_logprobs(tokenizer, choice.token_ids, choice.logprobs, offset, logprobs)
        if job.echo:
            text = _prompt_text(ctx, prompt) + text
        result.append(
            CompletionChoice(
                index=index, text=text, logprobs=logprobs,
                finish_reason=choice.finish_reason, stop_reason=choice.stop_reason,
            )
        )
    prompt_tokens = sum(len(p.token_ids) for p in job.prompts)
    completion_tokens = sum(len(c.token_ids) for c in choices)
    return CompletionResponse(
        id=job.request_id,
        model=job.model,
        choices=result,
        usage=UsageInfo.of(prompt_tokens, completion_tokens),
    )


async def stream_completion(ctx: ServingContext, job: CompletionJob, emit: Emit) -> None:
    """Run, passing each choice's news to ``emit`` as a chunk; usage last if asked for."""
    n = job.params.n
    tokenizer = ctx.engine.tokenizer
    offsets = [0] * (len(job.prompts) * n)
    started = [False] * (len(job.prompts) * n)
    prompt_logprobs: list[list[PositionLogprobs | None] | None] = [None] * len(job.prompts)
    prompt_tokens = sum(len(p.token_ids) for p in job.prompts)
    completion_tokens = 0

    def usage() -> UsageInfo:
        return UsageInfo.of(prompt_tokens, completion_tokens)

    async def handle(i: int, out: RequestOutput) -> None:
        nonlocal completion_tokens
        if out.prompt_logprobs is not None:
            prompt_logprobs[i] = out.prompt_logprobs
        for o in out.outputs:
            index = i * n + o.index
            completion_tokens += len(o.token_ids)
            text = o.text
            logprobs = CompletionLogprobs() if job.logprobs is not None else None
            if job.echo and not started[index]:
                prompt = job.prompts[i]
                text = _prompt_text(ctx, prompt) + text
                if logprobs is not None:
                    positions = prompt_logprobs[i] or [None] * len(prompt.token_ids)
                    _, offsets[index] = completion_logprobs(
                        tokenizer, prompt.token_ids, positions, offsets[index], logprobs
                    )
            started[index] = True
            if logprobs is not None:
                _, offsets[index] = completion_logprobs(
                    tokenizer, o.token_ids, o.logprobs or [], offsets[index], logprobs
                )
            if not text and o.finish_reason is None and not (logprobs and logprobs.tokens):
                continue
            choice = CompletionChoice(
                index=index, text=text, logprobs=logprobs,
                finish_reason=o.finish_reason, stop_reason=o.stop_reason,
            )
            await emit(
                CompletionChunk(
                    id=job.request_id, model=job.model, choices=[choice],
                    **usage_kwargs(job.include_usage, job.continuous_usage, usage),
                )
            )

    await run_prompts(ctx, job.request_id, job.prompts, job.params, job.priority, handle)
    if job.include_usage:
        await emit(CompletionChunk(id=job.request_id, model=job.model, choices=[], usage=usage()))
