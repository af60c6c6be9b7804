"""ReplicaGroup: N AsyncEngine replicas as Ray actors behind one engine protocol.

Each request goes to the least loaded replica, or, when it shares a long prefix with
earlier ones, to the replica whose prefix cache holds it. ``create_app(group)`` serves it
like any engine::

    group = ReplicaGroup(EngineConfig(model="demo"), num_replicas=2)
    app = create_app(group)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import ray
from ray.exceptions import RayActorError

from llmkit.config import EngineConfig
from llmkit.engine.core.tokenizer import Tokenizer
from llmkit.engine.frontend import EngineFrontend
from llmkit.engine.processor import InputProcessor, new_request_id
from llmkit.engine.protocol import ModelInfo, PromptType
from llmkit.engine.sched.admission import stats_refusal
from llmkit.errors import EngineDeadError
from llmkit.lora_request import LoRARequest
from llmkit.remote.ray_replica import Replica
from llmkit.remote.ray_stream import ReplicaStream, Submission
from llmkit.remote.routing import Router
from llmkit.sampling_params import PoolingParams, SamplingParams
from llmkit.types import EngineStats

logger = logging.getLogger(__name__)

_STATS_INTERVAL_S = 0.25
_SHUTDOWN_WAIT_S = 10.0
_OUTPUTS_IN_FLIGHT = 2


class ReplicaGroup(EngineFrontend):
    """Implements :class:`~llmkit.engine.protocol.EngineProtocol` over ``num_replicas``
    engines, each a Ray actor with ``num_cpus`` CPUs (and a GPU per tensor-parallel rank
    on CUDA). ``ray_address``: the cluster to join; none starts a local one (unless Ray is
    initialised already). ``prefix_tokens``: how many leading prompt tokens two requests
    must share to prefer one replica (0: route by load alone); ``affinity_slack``: how many
    more requests that replica may have than the least loaded before the load wins."""

    def __init__(
        self,
        config: EngineConfig,
        num_replicas: int,
        *,
        ray_address: str | None = None,
        num_cpus: float = 1,
        prefix_tokens: int = 64,
        affinity_slack: int = 4,
    ):
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
        if not ray.is_initialized():
            ray.init(address=ray_address, logging_level=logging.WARNING)
        self.config = config
        # On a cluster with GPUs a replica holds one per tensor-parallel rank ("auto" too).
        gpus = ray.cluster_resources().get("GPU", 0) if config.device == "auto" else 0
        cuda = config.device == "cuda" or gpus > 0
        actor = ray.remote(Replica)
        namespace = f"llmkit-{uuid.uuid4().hex[:8]}"
        # Ray's handles type their methods loosely; Any says so once.
        self.actors: list[Any] = [
            actor.options(
                name=f"llmkit-replica-{i}",
                namespace=namespace,
                num_cpus=num_cpus,
                num_gpus=config.tensor_parallel_size if cuda else 0,
            ).remote(config)
            for i in range(num_replicas)
        ]
        info: ModelInfo = ray.get(self.actors[0].info.remote())
        self._info = info
        self._processor = InputProcessor(info, Tokenizer(info.tokenizer))
        self._router = Router(prefix_tokens, affinity_slack)
        self._alive = set(range(num_replicas))
        self._in_flight = dict.fromkeys(range(num_replicas), 0)
        self._streams: dict[str, ReplicaStream[Any]] = {}
        self._snapshots: dict[int, EngineStats] = dict(
            enumerate(ray.get([a.stats.remote() for a in self.actors]))
        )
        self._poller: asyncio.Task[None] | None = None

    # ---- lifetime ------------------------------------------------------------------

    async def __aenter__(self) -> ReplicaGroup:
        self._poller = asyncio.get_running_loop().create_task(self._poll_stats())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        """Abort what is in flight and stop every replica."""
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None
        for stream in list(self._streams.values()):
            stream.close()
        for i in sorted(self._alive):
            with contextlib.suppress(RayActorError, TimeoutError):
                await asyncio.wait_for(self.actors[i].shutdown.remote(), _SHUTDOWN_WAIT_S)
            ray.kill(self.actors[i])
        self._alive.clear()

    def is_healthy(self) -> bool:
        return bool(self._alive)

    def stats(self) -> EngineStats:
        """The replicas' last snapshots, merged (``EngineStats.merge``)."""
        return EngineStats.merge([self._snapshots[i] for i in sorted(self._alive)])

    def replica_stats(self) -> dict[int, EngineStats]:
        """Each live replica's last snapshot."""
        return {i: self._snapshots[i] for i in sorted(self._alive)}

    def check_admission(self) -> None:
        """Refuse (EngineOverloadedError) when every replica's last reported queue is full."""
        errors = []
        for stats in self.replica_stats().values():
            error = stats_refusal(stats)
            if error is None:
                return
            errors.append(error)
        if errors:
            raise errors[0]

    def _inputs(self) -> InputProcessor:
        return self._processor

    async def abort(self, request_id: str) -> None:
        stream = self._streams.get(request_id)
        if stream is not None:
            stream.close()

    async def add_lora(self, lora_request: LoRARequest) -> None:
        """Load the adapter on every live replica (ValueError if it cannot serve)."""
        await asyncio.gather(*(self.actors[i].add_lora.remote(lora_request) for i in self._alive))

    async def remove_lora(self, lora_id: int) -> bool:
        removed = [self.actors[i].remove_lora.remote(lora_id) for i in self._alive]
        return any(await asyncio.gather(*removed))

    async def reset_prefix_cache(self) -> bool:
        """Reset every live replica's cache; True if all did."""
        done = [self.actors[i].reset_prefix_cache.remote() for i in self._alive]
        return all(await asyncio.gather(*done))

    def _start(
        self,
        prompt: PromptType,
        params: SamplingParams | PoolingParams,
        request_id: str | None,
        priority: int,
        lora_request: LoRARequest | None,
    ) -> ReplicaStream[Any]:
        if not self._alive:
            raise EngineDeadError("every replica of the group has stopped")
        self.check_admission()
        tokens = self._processor.prepare(prompt, params)
        request_id = request_id or new_request_id()
        if request_id in self._streams:
            raise ValueError(f"request id {request_id!r} is already in use")
        submission = Submission(request_id, tokens, params, priority, lora_request)
        stream: ReplicaStream[Any] = ReplicaStream(
            submission, self._dispatch, self._lost, self._done
        )
        self._streams[request_id] = stream
        return stream

    def _dispatch(self, s: Submission) -> tuple[int, Any, Any]:
        if not self._alive:
            raise EngineDeadError("every replica of the group has stopped")
        loads = {i: self._in_flight[i] for i in self._alive}
        # Another adapter's KV is never shared, so the adapter is part of the prefix.
        lora = s.lora_request.id if s.lora_request else 0
        replica = self._router.choose(s.prompt["prompt_token_ids"], loads, lora)
        self._in_flight[replica] += 1
        actor = self.actors[replica]
        # With few outputs in flight the replica waits for a slow reader, and its engine
        # coalesces the deltas meanwhile: fewer, larger Ray objects, as over a socket.
        gen = actor.run.options(
            num_returns="streaming", _generator_backpressure_num_objects=_OUTPUTS_IN_FLIGHT
        ).remote(s.prompt, s.params, s.request_id, s.priority, s.lora_request)
        return replica, actor, gen

    def _lost(self, replica: int) -> bool:
        """Replica ``replica`` died; returns whether another is left."""
        if replica in self._alive:
            logger.error("replica %d died; %d left", replica, len(self._alive) - 1)
            self._alive.discard(replica)
        self._in_flight[replica] = max(0, self._in_flight[replica] - 1)
        return bool(self._alive)

    def _done(self, stream: ReplicaStream[Any]) -> None:
        self._in_flight[stream.replica] = max(0, self._in_flight[stream.replica] - 1)
        if self._streams.get(stream.request_id) is stream:
            del self._streams[stream.request_id]

    async def _poll_stats(self) -> None:
        while True:
            for i in sorted(self._alive):
                await self._refresh(i)
            await asyncio.sleep(_STATS_INTERVAL_S)

    async def _refresh(self, replica: int) -> None:
        try:
            self._snapshots[replica] = await self.actors[replica].stats.remote()
        except RayActorError:
            self._in_flight[replica] += 1  # _lost takes off a request that was not there
            self._lost(replica)
