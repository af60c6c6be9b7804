"""vLLM's engine service (``vllm.grpc.engine.VllmEngine``) over the engine protocol: token ids
in, token ids out; the gateway in front (smg) tokenizes, renders chats and detokenizes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, NoReturn

import grpc
from smg_grpc_proto import vllm_engine_pb2 as pb
from smg_grpc_proto import vllm_engine_pb2_grpc as pb_grpc
from smg_grpc_proto.generated import common_pb2

from llmkit.engine.protocol import EngineProtocol, PromptType
from llmkit.errors import EngineDeadError, EngineOverloadedError, LLMKitError, ParamError
from llmkit.remote.grpc.outputs import ResponseBuilder
from llmkit.remote.grpc.params import sampling_params, truncation
from llmkit.remote.grpc.tokenizer import chunks, tokenizer_zip

SERVER_TYPE = "vllm-grpc"


@dataclass
class ServiceState:
    """What the service knows beside the engine: names, limits, and whether it drains."""

    served_model_name: str
    max_num_seqs: int = 0
    block_size: int = 0
    draining: bool = False
    in_flight: int = 0  # Generate and Embed calls running, which a drain waits for
    started: float = field(default_factory=time.time)


class VllmEngineService(pb_grpc.VllmEngineServicer):
    """The RPCs smg calls; every error is a status code (INVALID_ARGUMENT for bad input,
    UNAVAILABLE when the engine is overloaded, draining or dead), never a crash."""

    def __init__(self, engine: EngineProtocol, state: ServiceState):
        self.engine = engine
        self.state = state
        self._tokenizer_zip: bytes | None = None

    async def Generate(self, request: Any, context: Any) -> AsyncIterator[Any]:
        await self._check_open(context)
        self.state.in_flight += 1
        try:
            async for response in self._generate(request, context):
                yield response
        finally:
            self.state.in_flight -= 1

    async def _generate(self, request: Any, context: Any) -> AsyncIterator[Any]:
        params = request.sampling_params
        try:
            self.engine.check_admission()
            prompt = self.engine.tokenize(_prompt(request), truncation(params))
            stream = self.engine.generate(
                prompt,
                sampling_params(params, request.stream),
                request_id=request.request_id or None,
            )
        except ValueError as exc:
            await _abort_with(context, grpc.StatusCode.INVALID_ARGUMENT, exc)
        except LLMKitError as exc:
            await _abort_with(context, _status(exc), exc)
        builder = ResponseBuilder(request.stream, params.HasField("prompt_logprobs"))
        try:
            async for output in stream:
                for response in builder.responses(output):
                    yield response
        except LLMKitError as exc:
            await _abort_with(context, _status(exc), exc)
        finally:
            # A cancelled RPC (the client went away) lands here too: the request is aborted.
            await stream.aclose()

    async def Embed(self, request: Any, context: Any) -> Any:
        await self._check_open(context)
        self.state.in_flight += 1
        try:
            return await self._embed(request, context)
        finally:
            self.state.in_flight -= 1

    async def _embed(self, request: Any, context: Any) -> Any:
        try:
            self.engine.check_admission()
            prompt = self.engine.tokenize(list(request.tokenized.input_ids))
            stream = self.engine.encode(prompt, request_id=request.request_id or None)
        except ValueError as exc:
            await _abort_with(context, grpc.StatusCode.INVALID_ARGUMENT, exc)
        except LLMKitError as exc:
            await _abort_with(context, _status(exc), exc)
        try:
            async for output in stream:
                embedding = output.outputs.embedding
                return pb.EmbedResponse(
                    embedding=embedding,
                    prompt_tokens=len(output.prompt_token_ids),
                    embedding_dim=len(embedding),
                )
        except LLMKitError as exc:
            await _abort_with(context, _status(exc), exc)
        finally:
            await stream.aclose()
        return await _abort_with(context, grpc.StatusCode.INTERNAL, "no embedding came back")

    async def Abort(self, request: Any, context: Any) -> Any:
        for request_id in request.request_ids:
            await self.engine.abort(request_id)
        return pb.AbortResponse()

    async def FlushCache(self, request: Any, context: Any) -> Any:
        """Drop the prefix cache (blocks no running request holds)."""
        await self._check_open(context)
        done = await self.engine.reset_prefix_cache()
        why = "" if done else "this engine cannot reset its prefix cache from here"
        return common_pb2.FlushCacheResponse(success=done, message=why)

    async def HealthCheck(self, request: Any, context: Any) -> Any:
        if self.state.draining:
            return pb.HealthCheckResponse(healthy=False, message="draining")
        healthy = self.engine.is_healthy()
        return pb.HealthCheckResponse(healthy=healthy, message="" if healthy else "engine dead")

    async def GetModelInfo(self, request: Any, context: Any) -> Any:
        info = self.engine.model_info
        tokenizer = self.engine.tokenizer
        eos = tokenizer.eos_token_id
        return pb.GetModelInfoResponse(
            model_path=info.name,
            is_generation=info.supports_generate,
            max_context_length=info.max_model_len,
            vocab_size=info.vocab_size,
            supports_vision=info.supports_images,
            served_model_name=self.state.served_model_name,
            tokenizer_path=info.tokenizer,
            bos_token_id=tokenizer.bos_token_id or 0,
            pad_token_id=tokenizer.hf.pad_token_id or 0,
            max_req_input_len=info.max_model_len,
            eos_token_ids=[] if eos is None else [eos],
        )

    async def GetServerInfo(self, request: Any, context: Any) -> Any:
        stats = self.engine.stats()
        return pb.GetServerInfoResponse(
            active_requests=stats.num_running + stats.num_waiting,
            is_paused=self.state.draining,
            uptime_seconds=time.time() - self.state.started,
            server_type=SERVER_TYPE,
            data_parallel_size=1,
            block_size=self.state.block_size,
            max_num_seqs=self.state.max_num_seqs,
        )

    async def GetLoads(self, request: Any, context: Any) -> Any:
        stats = self.engine.stats()
        used = stats.kv_blocks_total - stats.kv_blocks_free
        block = self.state.block_size or 1
        load = pb.SchedulerLoad(
            dp_rank=0,
            num_running_reqs=stats.num_running,
            num_waiting_reqs=stats.num_waiting,
            num_total_reqs=stats.num_running + stats.num_waiting,
            num_used_tokens=used * block,
            max_total_num_tokens=stats.kv_blocks_total * block,
            token_usage=used / stats.kv_blocks_total if stats.kv_blocks_total else 0.0,
            cache_hit_rate=stats.prefix_cache_hit_rate,
            max_running_requests=self.state.max_num_seqs,
        )
        return pb.GetLoadsResponse(
            timestamp=datetime.now(timezone.utc).isoformat(),
            version=_version(),
            dp_rank_count=1,
            loads=[load],
        )

    async def GetTokenizer(self, request: Any, context: Any) -> AsyncIterator[Any]:
        if self._tokenizer_zip is None:
            self._tokenizer_zip = await asyncio.to_thread(
                tokenizer_zip, self.engine.tokenizer, self.engine.model_info.tokenizer
            )
        for data, digest in chunks(self._tokenizer_zip):
            yield common_pb2.GetTokenizerChunk(data=data, sha256=digest)

    async def _check_open(self, context: Any) -> None:
        if self.state.draining:
            await _abort_with(context, grpc.StatusCode.UNAVAILABLE, "the server is draining")


def _prompt(request: Any) -> PromptType:
    kind = request.WhichOneof("input")
    if kind == "tokenized":
        return list(request.tokenized.input_ids)
    if kind == "text":
        return request.text
    raise ParamError("input", "the request has no input: set tokenized.input_ids or text")


def _status(exc: LLMKitError) -> grpc.StatusCode:
    # UNAVAILABLE makes smg pick another worker.
    if isinstance(exc, (EngineOverloadedError, EngineDeadError)):
        return grpc.StatusCode.UNAVAILABLE
    return grpc.StatusCode.INTERNAL


async def _abort_with(context: Any, code: grpc.StatusCode, error: BaseException | str) -> NoReturn:
    await context.abort(code, str(error))
    raise AssertionError("context.abort raises")  # for type checkers: abort never returns


def _version() -> str:
    from importlib.metadata import version

    return f"llmkit {version('llmkit')}"
