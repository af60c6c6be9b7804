"""/v1/chat/completions: messages -> a templated prompt; outputs -> a response or chunks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jinja2

from llmkit.outputs import PositionLogprobs, RequestOutput
from llmkit.protocol.openai import (
    ChatChoice,
    ChatChoiceLogprobs,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatMessage,
    ChatResponseMessage,
    ChatStreamChoice,
    DeltaMessage,
    UsageInfo,
)
from llmkit.sampling_params import SamplingParams
from llmkit.serving.context import ServingContext
from llmkit.serving.engine_calls import EnginePrompt, run_prompts
from llmkit.serving.errors import bad_request, from_value_error
from llmkit.serving.logprobs import chat_logprobs
from llmkit.serving.params import (
    build_sampling_params,
    check_context_length,
    check_logprobs,
    check_stream_options,
    check_with_engine,
)
from llmkit.serving.stream import Emit, usage_kwargs

_TEXT_PARTS = ("text", "input_text")
_TEMPLATE_FLAGS = {"add_generation_prompt", "continue_final_message", "chat_template"}


@dataclass
class ChatJob:
    """A checked chat request, ready to run."""

    request_id: str
    model: str
    prompt: EnginePrompt
    params: SamplingParams
    logprobs: bool
    top_logprobs: int
    echo_text: str | None
    stream: bool
    include_usage: bool
    continuous_usage: bool
    priority: int


def to_conversation(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them; text parts join into one string, as in vLLM."""
    conversation = []
    for i, message in enumerate(messages):
        entry = message.model_dump(exclude_none=True)
        if isinstance(message.content, list):
            texts = []
            for part in message.content:
                if part.type not in _TEXT_PARTS or part.text is None:
                    raise bad_request(
                        f"messages.{i}.content: content parts of type {part.type!r} are not "
                        "supported (only text)",
                        "messages",
                    )
                texts.append(part.text)
            entry["content"] = "\n".join(texts)
        conversation.append(entry)
    return conversation


def render_messages(
    ctx: ServingContext,
    conversation: list[dict[str, Any]],
    chat_template: str | None,
    chat_template_kwargs: dict[str, Any] | None,
    add_generation_prompt: bool,
    continue_final_message: bool,
    tools: list[dict[str, Any]] | None = None,
) -> EnginePrompt:
    """The conversation rendered by the chat template and tokenized."""
    if not conversation:
        raise bad_request("messages must not be empty", "messages")
    try:
        prompt = ctx.engine.processor.render_chat(
            conversation, chat_template or ctx.chat_template, chat_template_kwargs,
            add_generation_prompt, continue_final_message, tools,
        )
    except ValueError as exc:
        raise from_value_error(exc, _TEMPLATE_FLAGS, default="messages") from None
    except jinja2.TemplateError as exc:
        raise bad_request(f"the chat template failed on these messages: {exc}", "messages") from None
    if not prompt["prompt_token_ids"]:
        raise bad_request("the messages rendered to an empty prompt", "messages")
    return EnginePrompt(prompt["prompt"], prompt["prompt_token_ids"])


def prepare_chat(ctx: ServingContext, req: ChatCompletionRequest, request_id: str) -> ChatJob:
    """Check everything and render the prompt; raises OpenAIError before the engine sees it."""
    model = ctx.admit(req, request_id, "generate")
    check_stream_options(req)
    if req.top_logprobs is not None and not req.logprobs:
        raise bad_request("top_logprobs can only be set when logprobs is true", "top_logprobs")
    top_logprobs = req.top_logprobs or 0
    limit = ctx.engine.config.max_logprobs
    if req.logprobs:
        check_logprobs(top_logprobs, limit, "top_logprobs")
    check_logprobs(req.prompt_logprobs, limit, "prompt_logprobs")
    max_tokens, max_name = req.max_tokens, "max_tokens"
    if req.max_completion_tokens is not None:
        max_tokens, max_name = req.max_completion_tokens, "max_completion_tokens"
    conversation = to_conversation(req.messages)
    prompt = render_messages(
        ctx, conversation, req.chat_template, req.chat_template_kwargs,
        req.add_generation_prompt, req.continue_final_message, req.tools,
    )
    check_context_length(len(prompt.token_ids), max_tokens, ctx.engine.max_model_len, "messages")
    renames = {"logprobs": "top_logprobs", "max_tokens": max_name}
    params = build_sampling_params(
        req, max_tokens=max_tokens, logprobs=top_logprobs if req.logprobs else None,
        prompt_logprobs=req.prompt_logprobs, renames=renames,
    )
    check_with_engine(ctx.engine.processor, params, len(prompt.token_ids), renames)
    echo_text = None
    if req.echo and conversation[-1]["role"] == "assistant":
        # As in vLLM: echo repeats the assistant message being continued.
        echo_text = conversation[-1].get("content") or None
    ctx.log_request(request_id, conversation, len(prompt.token_ids), params)
    options = req.stream_options
    return ChatJob(
        request_id=request_id,
        model=model,
        prompt=prompt,
        params=params,
        logprobs=req.logprobs,
        top_logprobs=top_logprobs,
        echo_text=echo_text,
        stream=req.stream,
        include_usage=bool(options and options.include_usage),
        continuous_usage=bool(options and options.include_usage and options.continuous_usage_stats),
        priority=req.priority,
    )


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[PositionLogprobs] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None


async def create_chat(ctx: ServingContext, job: ChatJob) -> ChatCompletionResponse:
    """Run to the end and answer with one response."""
    choices = [_Choice() for _ in range(job.params.n)]

    async def handle(_: int, out: RequestOutput) -> None:
        for o in out.outputs:
            choice = choices[o.index]
            choice.text.append(o.text)
            choice.token_ids.extend(o.token_ids)
            choice.logprobs.extend(o.logprobs or ())
            choice.finish_reason, choice.stop_reason = o.finish_reason, o.stop_reason

    await run_prompts(ctx, job.request_id, [job.prompt], job.params, job.priority, handle)
    tokenizer = ctx.engine.tokenizer
    result = []
    for index, choice in enumerate(choices):
        logprobs = None
        if job.logprobs:
            logprobs = ChatChoiceLogprobs(
                content=chat_logprobs(tokenizer, choice.token_ids, choice.logprobs, job.top_logprobs)
            )
        result.append(
            ChatChoice(
                index=index,
                message=ChatResponseMessage(content=(job.echo_text or "") + "".join(choice.text)),
                logprobs=logprobs,
                finish_reason=choice.finish_reason,
                stop_reason=choice.stop_reason,
            )
        )
    prompt_tokens = len(job.prompt.token_ids)
    completion_tokens = sum(len(c.token_ids) for c in choices)
    return ChatCompletionResponse(
        id=job.request_id,
        model=job.model,
        choices=result,
        usage=UsageInfo.of(prompt_tokens, completion_tokens),
    )


async def stream_chat(ctx: ServingContext, job: ChatJob, emit: Emit) -> None:
    """Run, emitting each choice's role first, then its content deltas, then its finish."""
    tokenizer = ctx.engine.tokenizer
    prompt_tokens = len(job.prompt.token_ids)
    completion_tokens = 0
    started = False

    def usage() -> UsageInfo:
        return UsageInfo.of(prompt_tokens, completion_tokens)

    async def send(choice: ChatStreamChoice) -> None:
        await emit(
            ChatCompletionChunk(
                id=job.request_id, model=job.model, choices=[choice],
                **usage_kwargs(job.include_usage, job.continuous_usage, usage),
            )
        )

    async def handle(_: int, out: RequestOutput) -> None:
        nonlocal completion_tokens, started
        if not started:
            started = True
            for index in range(job.params.n):
                await send(ChatStreamChoice(index=index, delta=DeltaMessage(role="assistant", content="")))
                if job.echo_text:
                    await send(ChatStreamChoice(index=index, delta=DeltaMessage(content=job.echo_text)))
        for o in out.outputs:
            completion_tokens += len(o.token_ids)
            logprobs = None
            if job.logprobs and o.token_ids:
                logprobs = ChatChoiceLogprobs(
                    content=chat_logprobs(tokenizer, o.token_ids, o.logprobs or [], job.top_logprobs)
                )
            if not o.text and o.finish_reason is None and logprobs is None:
                continue
            await send(
                ChatStreamChoice(
                    index=o.index,
                    delta=DeltaMessage(content=o.text) if o.text else DeltaMessage(),
                    logprobs=logprobs,
                    finish_reason=o.finish_reason,
                    stop_reason=o.stop_reason,
                )
            )

    await run_prompts(ctx, job.request_id, [job.prompt], job.params, job.priority, handle)
    if job.include_usage:
        await emit(ChatCompletionChunk(id=job.request_id, model=job.model, choices=[], usage=usage()))
