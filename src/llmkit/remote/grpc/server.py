"""serve_grpc: vLLM's engine service and the standard health service on one grpc.aio server,
with API keys checked on the metadata and a drain that lets in-flight streams finish."""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from smg_grpc_proto import vllm_engine_pb2_grpc as pb_grpc

from llmkit.engine.protocol import EngineProtocol
from llmkit.remote.grpc.decode import ParseInCall
from llmkit.remote.grpc.service import ServiceState, VllmEngineService

SERVICE_NAME = "vllm.grpc.engine.VllmEngine"
# After the drain, what is left gets this long to end once cancelled.
_CLOSE_GRACE_S = 0.5


class GrpcServer:
    """A running gRPC server over an engine: where it listens, and how to drain it."""

    def __init__(self, server: grpc.aio.Server, state: ServiceState, port: int):
        self._server = server
        self._state = state
        self._health = health.aio.HealthServicer()
        self.port = port

    def mark_draining(self) -> None:
        """Turn unhealthy (HealthCheck says so) and refuse new requests with UNAVAILABLE, so
        a gateway sends them elsewhere; in-flight ones go on."""
        self._state.draining = True

    async def drain(self, grace: float) -> None:
        """Mark draining and keep answering (unhealthy, new requests UNAVAILABLE) while the
        requests in flight finish, for up to ``grace`` seconds; then cancel the rest (which
        aborts them in the engine) and stop."""
        self.mark_draining()
        await self._health.enter_graceful_shutdown()
        deadline = time.monotonic() + grace
        while self._state.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await self._server.stop(_CLOSE_GRACE_S)

    async def wait_for_termination(self) -> None:
        await self._server.wait_for_termination()


@asynccontextmanager
async def serve_grpc(
    engine: EngineProtocol,
    address: str = "127.0.0.1:50051",
    *,
    served_model_name: str | None = None,
    api_keys: Iterable[str] = (),
    max_num_seqs: int = 0,
    block_size: int = 0,
    shutdown_grace: float = 5.0,
) -> AsyncIterator[GrpcServer]:
    """Serve ``engine`` as vLLM's gRPC engine service on ``address`` ("host:port"; port 0
    picks a free one, ``server.port`` says which) until the block ends, then drain for up to
    ``shutdown_grace`` seconds. With ``api_keys``, each call must carry ``authorization:
    Bearer KEY`` metadata. ``max_num_seqs``/``block_size`` are reported to the gateway (0:
    unknown). The engine is not started or stopped here: its owner does that.
    """
    state = ServiceState(
        served_model_name=served_model_name or engine.model_info.name,
        max_num_seqs=max_num_seqs,
        block_size=block_size,
    )
    keys = tuple(api_keys)
    server = grpc.aio.server(
        interceptors=[*([_KeyCheck(keys)] if keys else []), ParseInCall()],
        # Without this a second server could bind the same port and split the traffic.
        options=[("grpc.so_reuseport", 0)],
    )
    pb_grpc.add_VllmEngineServicer_to_server(VllmEngineService(engine, state), server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpc's "Failed to bind": the port is taken or invalid
        raise OSError(f"cannot listen on {address}: {exc}") from None
    running = GrpcServer(server, state, port)
    health_pb2_grpc.add_HealthServicer_to_server(running._health, server)
    serving = health_pb2.HealthCheckResponse.SERVING
    for name in ("", SERVICE_NAME):
        await running._health.set(name, serving)
    await server.start()
    try:
        yield running
    finally:
        await running.drain(shutdown_grace)


class _KeyCheck(grpc.aio.ServerInterceptor):
    """Refuses calls without one of the keys (UNAUTHENTICATED), as the HTTP app answers 401."""

    def __init__(self, keys: tuple[str, ...]):
        self._keys = tuple(f"Bearer {key}".encode() for key in keys)

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: Any
    ) -> Any:
        sent = dict(details.invocation_metadata or ()).get("authorization", "")
        given = sent.encode() if isinstance(sent, str) else sent
        if any(hmac.compare_digest(given, key) for key in self._keys):
            return await continuation(details)
        return _refusal(await continuation(details))


def _refusal(handler: Any) -> Any:
    async def refuse(request: Any, context: Any) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid API key is required")

    if handler is None:
        return None
    if handler.response_streaming:
        if handler.request_streaming:
            return grpc.stream_stream_rpc_method_handler(refuse)
        return grpc.unary_stream_rpc_method_handler(
            refuse, handler.request_deserializer, handler.response_serializer
        )
    return grpc.unary_unary_rpc_method_handler(
        refuse, handler.request_deserializer, handler.response_serializer
    )
