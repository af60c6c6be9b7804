"""A tensor-parallel worker process: its shard of the model, run on the batches rank 0 sends."""

from __future__ import annotations

import logging
import os
import pickle
import sys
from dataclasses import dataclass

import torch

from llmkit.config import EngineConfig
from llmkit.executor.channel import EXECUTE, LOGITS, STOP, StepChannel
from llmkit.executor.group import join_group
from llmkit.model.batch import StepBatch
from llmkit.model.loader import load_hf_config
from llmkit.model.runner import ModelRunner

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerArgs:
    config: EngineConfig
    model_path: str
    max_model_len: int
    rank: int
    store_port: int


def run_worker(args: WorkerArgs) -> None:
    """The process's main: join the group, load the shard, then follow rank 0 step by step."""
    config = args.config
    size = config.tensor_parallel_size
    cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(args.rank)
    else:
        # The ranks share the machine's cores; more threads each would only contend.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))
    tp = join_group(args.rank, size, args.store_port, cuda)
    runner = ModelRunner(
        config, args.model_path, load_hf_config(args.model_path), args.max_model_len, tp
    )
    channel = StepChannel(tp, runner.dtype)
    try:
        while True:
            cmd, payload = channel.receive()
            if cmd == STOP:
                return
            if cmd == EXECUTE:
                assert isinstance(payload, StepBatch)
                runner.forward(payload)
            elif cmd == LOGITS:
                assert isinstance(payload, torch.Tensor)
                runner.compute_logits(payload)
    except RuntimeError as exc:
        # Rank 0 is gone (its end of the group closed): nothing is left to serve.
        print(f"llmkit tensor-parallel worker {args.rank}: stopping: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    # Started by WorkerProcesses, which writes the pickled WorkerArgs to stdin.
    run_worker(pickle.load(sys.stdin.buffer))
