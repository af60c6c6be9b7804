"""Running one API request on the engine: one engine request per prompt, merged and timed."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from llmkit.engine.async_engine import RequestStream
from llmkit.errors import EngineDeadError, LLMKitError
from llmkit.outputs import EmbeddingRequestOutput, RequestOutput
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.serving.context import ServingContext
from llmkit.serving.errors import bad_request, from_engine_error

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

EngineOutput = RequestOutput | EmbeddingRequestOutput
OutputHandler = Callable[[int, EngineOutput], Awaitable[None]]


@dataclass
class EnginePrompt:
    """A prompt tokenized by the serving layer, so the engine does not tokenize it again."""

    text: str | None
    token_ids: list[int]

    def as_input(self) -> dict:
        return {"prompt": self.text, "prompt_token_ids": self.token_ids}


async def run_prompts(
    ctx: ServingContext,
    request_id: str,
    prompts: list[EnginePrompt],
    params: SamplingParams | PoolingParams,
    priority: int,
    handle: OutputHandler,
) -> None:
    """Start one engine request per prompt; pass each output to ``handle(prompt_index, out)``.

    Pooling params make them embedding requests (``engine.encode``), each with one output.

    However this ends (finished, cancelled by a disconnect, failed), every engine request
    is over when it returns: closing a stream aborts a request that still runs.
    """
    streams = await _start(ctx, request_id, prompts, params, priority)
    trackers = [ctx.track() for _ in streams]
    reasons: list[set[str | None]] = [set() for _ in streams]

    async def on_output(i: int, out: EngineOutput) -> None:
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
        raise from_engine_error(exc) from exc
    finally:
        for tracker in trackers:
            tracker.finish({"abort"})
        for stream in streams:
            await stream.aclose()


async def _start(
    ctx: ServingContext,
    request_id: str,
    prompts: list[EnginePrompt],
    params: SamplingParams | PoolingParams,
    priority: int,
) -> list[RequestStream]:
    start = ctx.engine.encode if isinstance(params, PoolingParams) else ctx.engine.generate
    streams: list[RequestStream] = []
    try:
        for i, prompt in enumerate(prompts):
            rid = request_id if len(prompts) == 1 else f"{request_id}-{i}"
            streams.append(start(prompt.as_input(), params, request_id=rid, priority=priority))
    except (ValueError, EngineDeadError) as exc:
        for stream in streams:
            await stream.aclose()
        if isinstance(exc, ValueError):
            raise bad_request(str(exc)) from None
        raise from_engine_error(exc) from exc
    return streams


async def _for_each_output(streams: list[RequestStream], handle: OutputHandler) -> None:
    if len(streams) == 1:
        async for out in streams[0]:
            await handle(0, out)
        return
    # No buffer: a producer waits for the handler, so its engine stream keeps coalescing
    # deltas meanwhile rather than queueing them here.
    send, receive = anyio.create_memory_object_stream[tuple[int, EngineOutput]](0)

    async def pump(i: int, stream: RequestStream, send) -> None:
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
