"""Run the Triton kernel tests on CUDA, or on the CPU through the Triton interpreter.

``@triton.jit`` chooses between compiling and interpreting once, when the kernel module
is imported, by reading ``TRITON_INTERPRET``. So the variable is set here, first thing,
before any test module imports ``llmkit.kernels``. If something imported the kernels
earlier in the session (another conftest, a plugin), the flag comes too late; without
CUDA the tests are then skipped with a message saying so rather than crashing. Run
``TRITON_INTERPRET=1 pytest tests/kernels`` to be independent of collection order.
"""

import os

if "TRITON_INTERPRET" not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

import secrets

import pytest
import torch

pytest.importorskip("triton")

from llmkit.kernels.paged_attention import paged_attention_kernel
from llmkit.kernels.runtime import is_interpreted


@pytest.fixture
def device() -> torch.device:
    """CUDA when present, else the CPU through the interpreter (skipped if unavailable)."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if not is_interpreted(paged_attention_kernel):
        pytest.skip(
            "no CUDA device, and llmkit.kernels was imported before TRITON_INTERPRET=1 "
            "was set; run `TRITON_INTERPRET=1 pytest tests/kernels`"
        )
    return torch.device("cpu")


@pytest.fixture
def seed() -> int:
    """A fresh seed per test (``LLMKIT_KERNEL_SEED`` replays one); failures report it."""
    fixed = os.environ.get("LLMKIT_KERNEL_SEED")
    return int(fixed) if fixed else secrets.randbelow(2**31)
