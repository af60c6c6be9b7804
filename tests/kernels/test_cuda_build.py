"""The kernels build for sm_80 and sm_90 through ptxas, so CI without a GPU catches
what the interpreter does not check (dot shapes, types, layouts, shared memory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_kernels_build_for_cuda(tmp_path: Path) -> None:
    pytest.importorskip("triton.backends.nvidia.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # build for real, not from a warm cache
    script = Path(__file__).with_name("cuda_build.py")
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("paged_attention") == 20
