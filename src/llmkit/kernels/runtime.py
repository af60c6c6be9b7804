"""Where a Triton kernel can run: CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``."""

from __future__ import annotations

import torch
from triton.runtime.interpreter import InterpretedFunction

from llmkit.errors import InternalError


def is_interpreted(kernel: object) -> bool:
    """Whether ``kernel`` was built by the Triton interpreter.

    Triton decides this once, when ``@triton.jit`` runs at import time of the kernel's
    module, from ``TRITON_INTERPRET``; setting the variable later has no effect.
    """
    return isinstance(kernel, InterpretedFunction)


def check_launchable(kernel: object, tensor: torch.Tensor) -> bool:
    """Raise a clear error where ``kernel`` cannot run on ``tensor``'s device.

    Returns whether the launch runs on the CPU under the interpreter, where ``tl.dot``
    needs fp32 operands (the interpreter multiplies bf16 as raw ``uint16`` bits).
    """
    if tensor.device.type != "cpu":
        return False
    if not is_interpreted(kernel):
        raise InternalError(
            "Triton kernels need CUDA tensors, or CPU tensors with TRITON_INTERPRET=1 set "
            "in the environment before llmkit.kernels is first imported"
        )
    return True
