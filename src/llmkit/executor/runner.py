"""The engine's model runner with tensor parallelism: rank 0 here, the other ranks in workers.

Rank 0 keeps the scheduler, the KV block allocator and the sampler; each step it sends
the flattened batch to the workers once, and every rank runs the forward on its shards.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch

from llmkit.config import EngineConfig
from llmkit.errors import EngineDeadError
from llmkit.executor.channel import StepChannel
from llmkit.executor.group import make_group
from llmkit.executor.processes import WorkerProcesses
from llmkit.model.device import resolve_device
from llmkit.model.loader import check_tensor_parallel, model_class
from llmkit.model.runner import ModelRunner, StepBatch

if TYPE_CHECKING:
    from transformers import PretrainedConfig

logger = logging.getLogger(__name__)


def create_runner(
    config: EngineConfig, model_path: str, hf_config: PretrainedConfig, max_model_len: int
) -> ModelRunner:
    """The runner ``config`` asks for: one process, or ``tensor_parallel_size`` ranks."""
    if config.tensor_parallel_size == 1:
        return ModelRunner(config, model_path, hf_config, max_model_len)
    return TensorParallelRunner(config, model_path, hf_config, max_model_len)


class TensorParallelRunner(ModelRunner):
    def __init__(
        self,
        config: EngineConfig,
        model_path: str,
        hf_config: PretrainedConfig,
        max_model_len: int,
    ):
        # Checked before any process starts, so a bad setting fails fast and cleanly.
        check_tensor_parallel(model_class(hf_config), config.tensor_parallel_size)
        cuda = resolve_device(config).type == "cuda"
        if cuda and torch.cuda.device_count() < config.tensor_parallel_size:
            raise ValueError(
                f"tensor_parallel_size={config.tensor_parallel_size} needs as many GPUs; "
                f"{torch.cuda.device_count()} found"
            )
        self.workers = WorkerProcesses(config, model_path, max_model_len)
        try:
            self.workers.wait_ready()
            tp = make_group(self.workers.store, 0, config.tensor_parallel_size, cuda)
            super().__init__(config, model_path, hf_config, max_model_len, tp)
        except (EngineDeadError, ValueError):
            # A worker died, or the model does not fit (which the workers find too).
            self.workers.stop(0.0)
            raise
        except BaseException as exc:
            lost = self.workers.lost(exc)
            self.workers.stop(0.0)
            raise lost from exc
        self.channel = StepChannel(tp, self.dtype)
        self._closed = False
        logger.info("tensor parallel over %d ranks", config.tensor_parallel_size)

    def forward(
        self,
        batch: StepBatch,
        image_rows: tuple[torch.Tensor, torch.Tensor] | None = None,
        in_flight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # The workers read the batch's own token ids: tensor parallelism never schedules
        # ahead of its tokens (EngineConfig refuses async scheduling with it).
        assert not batch.in_flight, "tensor parallel steps carry no tokens in flight"
        try:
            self.channel.send_batch(batch)
            return super().forward(batch, image_rows)
        except Exception as exc:
            # Past the broadcast the ranks can no longer be in step: the group is done.
            raise self._lost(exc) from exc

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        try:
            self.channel.send_rows(hidden)
            return super().compute_logits(hidden)
        except Exception as exc:
            raise self._lost(exc) from exc

    def _lost(self, exc: Exception) -> EngineDeadError:
        lost = self.workers.lost(exc)
        self._closed = True
        self.workers.stop(0.0)
        return lost

    def close(self) -> None:
        """Tell the workers to stop, and wait for them (or end them)."""
        if not self._closed:
            self._closed = True
            try:
                self.channel.send_stop()
            except RuntimeError:
                logger.warning("a tensor-parallel worker was already gone at shutdown")
        self.workers.stop()
