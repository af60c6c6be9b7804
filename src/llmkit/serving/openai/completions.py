"""/v1/completions: a request -> engine prompts and params; outputs -> a response or chunks."""

from __future__ import annotations

from dataclasses import dataclass

from llmkit.engine.sched.context_window import completion_budget
from llmkit.outputs import PositionLogprobs, RequestOutput
from llmkit.protocol.openai import (
    CompletionChoice,
    CompletionChunk,
    CompletionLogprobs,
    CompletionRequest,
    CompletionResponse,
)
from llmkit.serving.beam_search import beam_search_params
from llmkit.serving.choices import GenerationJob, JoinedChoice
from llmkit.serving.context import ServingContext
from llmkit.serving.engine_calls import (
    compile_constraint,
    run_streams,
    start_beam_search,
    start_generation,
)
from llmkit.serving.errors import bad_request
from llmkit.serving.fim import infill
from llmkit.serving.logprobs import completion_logprobs
from llmkit.serving.params import build_sampling_params, check_context_length
from llmkit.serving.prompts import EnginePrompt, tokenize_inputs
from llmkit.serving.stream import Emit, StreamSettings
from llmkit.serving.usage import UsageCounter


@dataclass
class CompletionJob(GenerationJob):
    """A checked, started completion request."""

    prompts: list[EnginePrompt]
    echo: bool
    logprobs: int | None


async def prepare_completion(
    ctx: ServingContext, req: CompletionRequest, request_id: str
) -> CompletionJob:
    """Check everything, tokenize and start; raises OpenAIError before any response begins."""
    model = ctx.admit(req, request_id, "generate")
    options = StreamSettings.of(req, ctx.options.force_include_usage)
    if req.best_of is not None and req.best_of != req.n and not req.use_beam_search:
        raise bad_request(f"best_of must equal n ({req.n}) if given, got {req.best_of}", "best_of")
    prompts = await tokenize_inputs(ctx, req.prompt, "prompt")
    if req.suffix is not None:  # fill in the middle: the prompt is what comes before it
        prompts = [infill(ctx, p, req.suffix, req.max_tokens) for p in prompts]
    info = ctx.engine.model_info
    for prompt in prompts:
        check_context_length(len(prompt.token_ids), req.max_tokens, info.max_model_len, "prompt")
    prompt_logprobs = req.prompt_logprobs
    if req.echo and req.logprobs is not None:
        # An echoed prompt comes with its own logprobs, as OpenAI's API returns them.
        prompt_logprobs = max(prompt_logprobs or 0, req.logprobs)
    params = build_sampling_params(
        req,
        max_tokens=req.max_tokens,
        logprobs=req.logprobs,
        prompt_logprobs=prompt_logprobs,
        structured_outputs=req.structured_outputs,
    )
    ctx.log_request(request_id, req.prompt, sum(len(p.token_ids) for p in prompts), params)
    lora = ctx.loras.get(model)
    if req.use_beam_search:
        longest = max(len(p.token_ids) for p in prompts)
        max_tokens = completion_budget(longest, req.max_tokens, info.max_model_len)
        beams = beam_search_params(req, max_tokens, info.max_logprobs)
        streams = start_beam_search(ctx, request_id, prompts, beams, req.priority, lora)
    else:
        await compile_constraint(ctx, params)
        streams = start_generation(ctx, request_id, prompts, params, req.priority, lora)
    return CompletionJob(
        request_id=request_id,
        model=model,
        params=params,
        streams=streams,
        options=options,
        prompts=prompts,
        echo=req.echo,
        logprobs=req.logprobs,
    )


def _usage(ctx: ServingContext, job: CompletionJob) -> UsageCounter:
    prompt_tokens = sum(len(p.token_ids) for p in job.prompts)
    return UsageCounter(prompt_tokens, ctx.options.prompt_tokens_details)


def _prompt_text(ctx: ServingContext, prompt: EnginePrompt) -> str:
    if prompt.text is not None:
        return prompt.text
    return ctx.engine.tokenizer.decode(prompt.token_ids)


async def create_completion(ctx: ServingContext, job: CompletionJob) -> CompletionResponse:
    """Run to the end and answer with one response."""
    n = job.params.n
    choices = [JoinedChoice(i // n) for i in range(len(job.prompts) * n)]
    prompt_logprobs: list[list[PositionLogprobs | None] | None] = [None] * len(job.prompts)
    usage = _usage(ctx, job)

    async def handle(i: int, out: RequestOutput) -> None:
        usage.note_cached(i, out)
        if out.prompt_logprobs is not None:
            prompt_logprobs[i] = out.prompt_logprobs
        for o in out.outputs[:n]:  # beam search answers with its best_of beams, best first
            usage.completion_tokens += len(o.token_ids)
            choices[i * n + o.index].add(o)

    await run_streams(ctx, job.streams, handle)
    tokenizer = ctx.engine.tokenizer
    as_ids = ctx.options.return_tokens_as_token_ids
    result = []
    for index, choice in enumerate(choices):
        prompt = job.prompts[choice.prompt_index]
        text = choice.text
        logprobs = None
        if job.logprobs is not None:
            logprobs, offset = CompletionLogprobs(), 0
            if job.echo:
                positions = prompt_logprobs[choice.prompt_index] or [None] * len(prompt.token_ids)
                _, offset = completion_logprobs(
                    tokenizer, prompt.token_ids, positions, 0, logprobs, as_ids
                )
            completion_logprobs(
                tokenizer, choice.token_ids, choice.logprobs, offset, logprobs, as_ids
            )
        if job.echo:
            text = _prompt_text(ctx, prompt) + text
        result.append(
            CompletionChoice(
                index=index,
                text=text,
                logprobs=logprobs,
                finish_reason=choice.finish_reason,
                stop_reason=choice.stop_reason,
            )
        )
    return CompletionResponse(
        id=job.request_id, model=job.model, choices=result, usage=usage.info()
    )


async def stream_completion(ctx: ServingContext, job: CompletionJob, emit: Emit) -> None:
    """Run, passing each choice's news to ``emit`` as a chunk; usage last if asked for."""
    n = job.params.n
    tokenizer = ctx.engine.tokenizer
    offsets = [0] * (len(job.prompts) * n)
    started = [False] * (len(job.prompts) * n)
    prompt_logprobs: list[list[PositionLogprobs | None] | None] = [None] * len(job.prompts)
    usage = _usage(ctx, job)
    as_ids = ctx.options.return_tokens_as_token_ids

    async def handle(i: int, out: RequestOutput) -> None:
        usage.note_cached(i, out)
        if out.prompt_logprobs is not None:
            prompt_logprobs[i] = out.prompt_logprobs
        for o in out.outputs:
            index = i * n + o.index
            usage.completion_tokens += len(o.token_ids)
            text = o.text
            logprobs = CompletionLogprobs() if job.logprobs is not None else None
            if job.echo and not started[index]:
                prompt = job.prompts[i]
                text = _prompt_text(ctx, prompt) + text
                if logprobs is not None:
                    positions = prompt_logprobs[i] or [None] * len(prompt.token_ids)
                    _, offsets[index] = completion_logprobs(
                        tokenizer, prompt.token_ids, positions, offsets[index], logprobs, as_ids
                    )
            started[index] = True
            if logprobs is not None:
                _, offsets[index] = completion_logprobs(
                    tokenizer, o.token_ids, o.logprobs or [], offsets[index], logprobs, as_ids
                )
            if not text and o.finish_reason is None and not (logprobs and logprobs.tokens):
                continue
            choice = CompletionChoice(
                index=index,
                text=text,
                logprobs=logprobs,
                finish_reason=o.finish_reason,
                stop_reason=o.stop_reason,
            )
            await emit(
                CompletionChunk(
                    id=job.request_id,
                    model=job.model,
                    choices=[choice],
                    **job.options.chunk_usage(usage.info),
                )
            )

    await run_streams(ctx, job.streams, handle)
    if job.options.include_usage:
        await emit(
            CompletionChunk(id=job.request_id, model=job.model, choices=[], usage=usage.info())
        )
