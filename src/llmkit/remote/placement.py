"""create_engine: where the served engine runs, chosen once for the CLI and for apps.

In this process (``AsyncEngine``), as ``data_parallel_size`` replicas on Ray
(``ReplicaGroup``), or in another process reached at ``engine_socket`` (``EngineClient``);
each is an EngineProtocol that ``create_app`` serves, started by ``async with``.
"""

from __future__ import annotations

import os

from llmkit.config import EngineConfig
from llmkit.engine.async_engine import AsyncEngine
from llmkit.engine.protocol import EngineProtocol
from llmkit.remote.unix.client import EngineClient


def create_engine(
    config: EngineConfig | None = None,
    *,
    data_parallel_size: int = 1,
    ray_address: str | None = None,
    engine_socket: str | os.PathLike[str] | None = None,
) -> EngineProtocol:
    """The engine ``config`` describes, here or on Ray replicas (``data_parallel_size`` > 1 or
    a ``ray_address``; needs ``llmkit[ray]``), or the one already running at
    ``engine_socket`` (then no config: that engine has its own). ``ValueError`` if the
    choices do not go together. A local engine or replicas load the model here and now."""
    if engine_socket is not None:
        if config is not None or data_parallel_size != 1 or ray_address:
            raise ValueError(
                "engine_socket reaches an engine that runs its own model: give no config, "
                "data_parallel_size or ray_address with it"
            )
        return EngineClient(engine_socket)
    if config is None:
        raise ValueError("create_engine needs an EngineConfig, or the engine_socket of one")
    if data_parallel_size < 1:
        raise ValueError(f"data_parallel_size must be >= 1, got {data_parallel_size}")
    if data_parallel_size > 1 or ray_address:
        from llmkit.remote.ray import ReplicaGroup  # Ray is an extra: imported only here

        return ReplicaGroup(config, data_parallel_size, ray_address=ray_address)
    return AsyncEngine(config)
