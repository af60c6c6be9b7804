"""/v1/chat/completions: messages -> a templated prompt; outputs -> a response or chunks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from llmkit.outputs import RequestOutput
from llmkit.protocol.openai import (
    ChatChoice,
    ChatChoiceLogprobs,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatResponseMessage,
    ChatStreamChoice,
    DeltaMessage,
)
from llmkit.serving.choices import GenerationJob, JoinedChoice
from llmkit.serving.context import ServingContext
from llmkit.serving.conversation import content_format, message_text, to_conversation
from llmkit.serving.engine_calls import compile_constraint, run_streams, start_generation
from llmkit.serving.errors import bad_request, from_value_error, naming
from llmkit.serving.extraction import Extractor
from llmkit.serving.logprobs import chat_logprobs
from llmkit.serving.media import image_parts
from llmkit.serving.params import build_sampling_params, check_context_length
from llmkit.serving.prompts import EnginePrompt
from llmkit.serving.stream import Emit, StreamSettings
from llmkit.serving.structured import structured_outputs
from llmkit.serving.tool_choice import ToolPlan, plan_tools
from llmkit.serving.usage import UsageCounter


@dataclass
class ChatJob(GenerationJob):
    """A checked, started chat request."""

    prompt: EnginePrompt
    logprobs: bool
    top_logprobs: int
    echo_text: str | None
    tools: ToolPlan
    role: str  # of the reply: the server's response role, or the turn being continued

    def extractor(self, ctx: ServingContext) -> Extractor | None:
        """A choice's reasoning and tool-call extraction; None if the server and request
        ask for neither. Forced calls have no reasoning before them."""
        reasoning = None
        if ctx.reasoning_parser is not None and not self.tools.forced:
            reasoning = ctx.reasoning_parser()
        if reasoning is None and self.tools.parser is None:
            return None
        tool_name = None if self.tools.forced else ctx.options.tool_call_parser
        names = (ctx.options.reasoning_parser, tool_name)
        fields = ctx.options.reasoning_fields
        return Extractor(reasoning, self.tools.parser, self.tools.max_calls, names, fields)


async def render_messages(
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
        prompt = await ctx.offload(
            lambda: ctx.engine.render_chat(
                conversation,
                chat_template or ctx.chat_template,
                chat_template_kwargs,
                add_generation_prompt,
                continue_final_message,
                tools,
            )
        )
    except ValueError as exc:
        raise from_value_error(exc, default="messages") from None
    except jinja2.TemplateError as exc:
        raise bad_request(
            f"the chat template failed on these messages: {exc}", "messages"
        ) from None
    if not prompt["prompt_token_ids"]:
        raise bad_request("the messages rendered to an empty prompt", "messages")
    return EnginePrompt(prompt["prompt"], prompt["prompt_token_ids"])


async def prepare_chat(
    ctx: ServingContext,
    req: ChatCompletionRequest,
    request_id: str,
    images: list[Any] | None = None,
) -> ChatJob:
    """Check everything, render the prompt and start; raises OpenAIError before any response.

    ``images``: the messages' ``image_url`` parts loaded (``media.chat_images``), in order.
    """
    model = ctx.admit(req, request_id, "generate")
    if images is None and image_parts(req.messages):
        raise bad_request(
            "image_url content parts are taken by POST /v1/chat/completions", "messages"
        )
    options = StreamSettings.of(req, ctx.options.force_include_usage)
    if req.top_logprobs is not None and not req.logprobs:
        raise bad_request("top_logprobs can only be set when logprobs is true", "top_logprobs")
    top_logprobs = req.top_logprobs or 0
    max_tokens, max_name = req.max_tokens, "max_tokens"
    if req.max_completion_tokens is not None:
        max_tokens, max_name = req.max_completion_tokens, "max_completion_tokens"
    tools = plan_tools(ctx, req)
    info = ctx.engine.model_info
    placeholder = None
    if info.image_token_id is not None:
        placeholder = ctx.engine.tokenizer.token_text(info.image_token_id)
    fmt = content_format(ctx, req.chat_template)
    conversation = to_conversation(req.messages, fmt, placeholder)
    prompt = await render_messages(
        ctx,
        conversation,
        req.chat_template,
        req.chat_template_kwargs,
        req.add_generation_prompt,
        req.continue_final_message,
        tools.tools,
    )
    prompt.images = images or []
    # Each image's placeholder becomes image_tokens tokens in the engine.
    num_tokens = len(prompt.token_ids) + len(prompt.images) * (info.image_tokens - 1)
    check_context_length(num_tokens, max_tokens, info.max_model_len, "messages")
    constraint, constraint_renames = structured_outputs(req.structured_outputs, req.response_format)
    if tools.forced:
        if constraint is not None:
            raise bad_request(
                'tool_choice "required" or a named tool cannot be combined with '
                "response_format or structured_outputs",
                "tool_choice",
            )
        constraint, constraint_renames = tools.constraint, {"structured_outputs": "tools"}
    # The engine's names for what this request calls otherwise, for its 400s.
    names = {"logprobs": "top_logprobs", "max_tokens": max_name, **constraint_renames}
    with naming(names):
        params = build_sampling_params(
            req,
            max_tokens=max_tokens,
            logprobs=top_logprobs if req.logprobs else None,
            prompt_logprobs=req.prompt_logprobs,
            structured_outputs=constraint,
        )
    reasoning = None if tools.forced else ctx.reasoning_parser
    if any(p is not None and p.special_markup for p in (tools.parser, reasoning)):
        params.skip_special_tokens = False
    echo_text = None
    if req.echo and conversation[-1]["role"] == "assistant":
        # As in vLLM: echo repeats the assistant message being continued.
        echo_text = message_text(req.messages[-1]) or None
    ctx.log_request(request_id, conversation, len(prompt.token_ids), params)
    lora = ctx.loras.get(model)
    with naming(names):
        await compile_constraint(ctx, params)
        streams = start_generation(ctx, request_id, [prompt], params, req.priority, lora)
    return ChatJob(
        request_id=request_id,
        model=model,
        params=params,
        streams=streams,
        options=options,
        prompt=prompt,
        logprobs=bool(req.logprobs),
        top_logprobs=top_logprobs,
        echo_text=echo_text,
        tools=tools,
        role=ctx.options.response_role if req.add_generation_prompt else conversation[-1]["role"],
    )


async def create_chat(ctx: ServingContext, job: ChatJob) -> ChatCompletionResponse:
    """Run to the end and answer with one response."""
    choices = [JoinedChoice() for _ in range(job.params.n)]
    usage = UsageCounter(len(job.prompt.token_ids), ctx.options.prompt_tokens_details)

    async def handle(_: int, out: RequestOutput) -> None:
        usage.note_cached(0, out)
        for o in out.outputs:
            usage.completion_tokens += len(o.token_ids)
            choices[o.index].add(o)

    await run_streams(ctx, job.streams, handle)
    tokenizer = ctx.engine.tokenizer
    result = []
    for index, choice in enumerate(choices):
        logprobs = None
        if job.logprobs:
            logprobs = ChatChoiceLogprobs(
                content=chat_logprobs(
                    tokenizer,
                    choice.token_ids,
                    choice.logprobs,
                    job.top_logprobs,
                    ctx.options.return_tokens_as_token_ids,
                )
            )
        message = ChatResponseMessage(role=job.role, content=(job.echo_text or "") + choice.text)
        finish_reason = choice.finish_reason
        extractor = job.extractor(ctx)
        if extractor is not None:
            parts = extractor.whole(choice.text)
            for name in ctx.options.reasoning_fields:
                setattr(message, name, parts.reasoning)
            message.tool_calls = parts.tool_calls
            message.content = parts.content
            if job.echo_text:
                message.content = job.echo_text + (parts.content or "")
            if parts.tool_calls and finish_reason == "stop":
                finish_reason = "tool_calls"
        result.append(
            ChatChoice(
                index=index,
                message=message,
                logprobs=logprobs,
                finish_reason=finish_reason,
                stop_reason=choice.stop_reason,
            )
        )
    return ChatCompletionResponse(
        id=job.request_id, model=job.model, choices=result, usage=usage.info()
    )


async def stream_chat(ctx: ServingContext, job: ChatJob, emit: Emit) -> None:
    """Run, emitting each choice's role first, then its content deltas, then its finish."""
    tokenizer = ctx.engine.tokenizer
    usage = UsageCounter(len(job.prompt.token_ids), ctx.options.prompt_tokens_details)
    started = False
    extractors = [job.extractor(ctx) for _ in range(job.params.n)]

    async def send(choice: ChatStreamChoice) -> None:
        await emit(
            ChatCompletionChunk(
                id=job.request_id,
                model=job.model,
                choices=[choice],
                **job.options.chunk_usage(usage.info),
            )
        )

    async def handle(_: int, out: RequestOutput) -> None:
        nonlocal started
        usage.note_cached(0, out)
        if not started:
            started = True
            for index in range(job.params.n):
                await send(
                    ChatStreamChoice(index=index, delta=DeltaMessage(role=job.role, content=""))
                )
                if job.echo_text:
                    await send(
                        ChatStreamChoice(index=index, delta=DeltaMessage(content=job.echo_text))
                    )
        for o in out.outputs:
            usage.completion_tokens += len(o.token_ids)
            logprobs = None
            if job.logprobs and o.token_ids:
                logprobs = ChatChoiceLogprobs(
                    content=chat_logprobs(
                        tokenizer,
                        o.token_ids,
                        o.logprobs or [],
                        job.top_logprobs,
                        ctx.options.return_tokens_as_token_ids,
                    )
                )
            finish_reason = o.finish_reason
            extractor = extractors[o.index]
            if extractor is None:
                delta = DeltaMessage(content=o.text) if o.text else None
            else:
                delta = extractor.feed(o.text, final=finish_reason is not None)
                finish_reason = extractor.finish_reason(finish_reason)
            if delta is None and finish_reason is None and logprobs is None:
                continue
            await send(
                ChatStreamChoice(
                    index=o.index,
                    delta=delta or DeltaMessage(),
                    logprobs=logprobs,
                    finish_reason=finish_reason,
                    stop_reason=o.stop_reason,
                )
            )

    await run_streams(ctx, job.streams, handle)
    if job.options.include_usage:
        await emit(
            ChatCompletionChunk(id=job.request_id, model=job.model, choices=[], usage=usage.info())
        )
