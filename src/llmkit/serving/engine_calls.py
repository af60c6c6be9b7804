"""Running one API request on the engine: one engine request per prompt, merged and timed.

The engine requests start while the API request is being checked (``start_generation``,
``start_embedding``), so input the engine refuses is a 400 before any response begins;
:func:`run_streams` then reads them and always leaves them closed, which aborts whatever
still runs.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from anyio.abc import ObjectSendStream

from llmkit.engine.beam_search import BeamSearchParams
from llmkit.engine.beam_search_stream import start_beam_search as beam_search
from llmkit.engine.protocol import OutputStream
from llmkit.errors import LLMKitError
from llmkit.lora_request import LoRARequest
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import from_value_error
from llmkit.serving.prompts import EnginePrompt

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

Output = TypeVar("Output", RequestOutput, EmbeddingRequestOutput)
Handler = Callable[[int, Output], Awaitable[None]]


async def compile_constraint(ctx: ServingContext, params: SamplingParams) -> None:
    """Compile the request's structured-output constraint before it starts, off the event
    loop and within the server's time limit: a 400 naming the field if it is invalid or
    too slow to compile; then starting the request finds it in the cache."""
    try:
        await ctx.engine.compile_structured(
            params, ctx.options.structured_outputs_compile_timeout_s
        )
    except ValueError as exc:
        raise from_value_error(exc) from None


def start_generation(
    ctx: ServingContext,
    request_id: str,
    prompts: list[EnginePrompt],
    params: SamplingParams,
    priority: int,
    lora_request: LoRARequest | None = None,
) -> list[OutputStream[RequestOutput]]:
    """Start one generation request per prompt (with ``lora_request``'s adapter); see
    :func:`_start`."""

    def start(prompt: EnginePrompt, rid: str) -> OutputStream[RequestOutput]:
        return ctx.engine.generate(
            prompt.as_input(), params, request_id=rid, priority=priority, lora_request=lora_request
        )

    return _start(ctx, request_id, prompts, start)


def start_beam_search(
    ctx: ServingContext,
    request_id: str,
    prompts: list[EnginePrompt],
    params: BeamSearchParams,
    priority: int,
    lora_request: LoRARequest | None = None,
) -> list[OutputStream[RequestOutput]]:
    """Start one beam search per prompt, each a stream of one output; see :func:`_start`."""

    def start(prompt: EnginePrompt, rid: str) -> OutputStream[RequestOutput]:
        return beam_search(
            ctx.engine,
            prompt.as_input(),
            params,
            request_id=rid,
            priority=priority,
            lora_request=lora_request,
        )

    return _start(ctx, request_id, prompts, start)


def start_embedding(
    ctx: ServingContext,
    request_id: str,
    prompts: list[EnginePrompt],
    params: PoolingParams,
    priority: int,
) -> list[OutputStream[EmbeddingRequestOutput]]:
    """Start one pooling request per prompt; see :func:`_start`."""

    def start(prompt: EnginePrompt, rid: str) -> OutputStream[EmbeddingRequestOutput]:
        return ctx.engine.encode(prompt.as_input(), params, request_id=rid, priority=priority)

    return _start(ctx, request_id, prompts, start)


def _start(
    ctx: ServingContext,
    request_id: str,
    prompts: list[EnginePrompt],
    start: Callable[[EnginePrompt, str], OutputStream[Output]],
) -> list[OutputStream[Output]]:
    """Start one engine request per prompt, all or none.

    A ``ValueError`` from the engine becomes a 400 naming the parameter a ``ParamError``
    names; nothing is left running then.
    """
    streams: list[OutputStream[Output]] = []
    try:
        for i, prompt in enumerate(prompts):
            streams.append(start(prompt, request_id if len(prompts) == 1 else f"{request_id}-{i}"))
    except (ValueError, LLMKitError) as exc:
        for stream in streams:
            stream.close()
        if isinstance(exc, ValueError):
            raise from_value_error(exc) from None
        raise ctx.engine_error(exc) from exc
    return streams


async def run_streams(
    ctx: ServingContext, streams: list[OutputStream[Output]], handle: Handler[Output]
) -> None:
    """Pass each output to ``handle(prompt_index, output)``, timing them for the metrics.

    However this ends (finished, cancelled by a disconnect, failed), every engine request
    is over when it returns: closing a stream aborts a request that still runs.
    """
    trackers = [ctx.track() for _ in streams]
    reasons: list[set[str | None]] = [set() for _ in streams]

    async def on_output(i: int, out: Output) -> None:
        if isinstance(out, EmbeddingRequestOutput):
            # No tokens to time; a pooled request that ends counts as "stop", as in vLLM.
            reasons[i].add("stop")
        else:
            trackers[i].tokens(sum(len(o.token_ids) for o in out.outputs))
            reasons[i].update(o.finish_reason for o in out.outputs)
        if out.finished:
            trackers[i].finish(reasons[i])
        await handle(i, out)

    try:
        await _for_each_output(streams, on_output)
    except LLMKitError as exc:
        for tracker in trackers:
            tracker.finish({"error"})
        raise ctx.engine_error(exc) from exc
    finally:
        for tracker in trackers:
            tracker.finish({"abort"})
        for stream in streams:
            await stream.aclose()


async def _for_each_output(streams: list[OutputStream[Output]], handle: Handler[Output]) -> None:
    if len(streams) == 1:
        async for out in streams[0]:
            await handle(0, out)
        return
    # No buffer: a producer waits for the handler, so its engine stream keeps coalescing
    # deltas meanwhile rather than queueing them here.
    send, receive = anyio.create_memory_object_stream[tuple[int, Output]](0)

    async def pump(
        i: int, stream: OutputStream[Output], send: ObjectSendStream[tuple[int, Output]]
    ) -> None:
        async with send:
            async for out in stream:
                await send.send((i, out))

    try:
        async with anyio.create_task_group() as tg:
            for i, stream in enumerate(streams):
                tg.start_soon(pump, i, stream, send.clone())
            send.close()
            async with receive:
                async for i, out in receive:
                    await handle(i, out)
    except BaseExceptionGroup as group:
        raise _first_error(group) from None


def _first_error(group: BaseExceptionGroup) -> BaseException:
    """The error a caller should see: the first that is not a cancellation."""
    cancelled = anyio.get_cancelled_exc_class()
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            exc = _first_error(exc)
        if not isinstance(exc, cancelled):
            return exc
    return group.exceptions[0]
