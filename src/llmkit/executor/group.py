"""The tensor-parallel process group: a TCP store on rank 0, gloo on CPU, NCCL on CUDA.

Each engine makes a group of its own (not torch.distributed's global default group), so
several engines can live in one process.
"""

from __future__ import annotations

import datetime
from typing import cast

import torch
import torch.distributed as dist

from llmkit.model.parallel import Collectives, TensorParallel

HOST = "127.0.0.1"
# Bounds a collective that waits on a rank that hangs; a rank that dies fails it at once.
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=5)


def open_store(size: int) -> dist.TCPStore:
    """Rank 0's store, on a free port (``store.port``) the workers connect to."""
    return dist.TCPStore(
        HOST, 0, size, is_master=True, timeout=COLLECTIVE_TIMEOUT, wait_for_workers=False
    )


def make_group(store: dist.Store, rank: int, size: int, cuda: bool) -> TensorParallel:
    if cuda:
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = COLLECTIVE_TIMEOUT
        group = cast(Collectives, dist.ProcessGroupNCCL(store, rank, size, options))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        group = cast(Collectives, dist.ProcessGroupGloo(store, rank, size, COLLECTIVE_TIMEOUT))
        device = torch.device("cpu")
    return TensorParallel(rank, size, group, device)


def join_group(rank: int, size: int, port: int, cuda: bool) -> TensorParallel:
    """A worker's side: connect to rank 0's store, say it is ready, build the group."""
    store = dist.TCPStore(HOST, port, size, is_master=False, timeout=COLLECTIVE_TIMEOUT)
    store.set(f"ready/{rank}", "1")
    return make_group(store, rank, size, cuda)
