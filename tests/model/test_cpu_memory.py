"""keep_freed_memory: a freed large tensor's memory stays in the process for the next one."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

SCRIPT = """
import sys, torch
from llmkit.model.cpu_memory import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
x = torch.ones(24 * 2**20 // 4)  # 24 MiB, touched
before = resident_mib()
del x
print(before - resident_mib())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_freed_memory_stays_in_the_process():
    def released(mode: str) -> float:
        run = subprocess.run(
            [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
        )
        return float(run.stdout)

    assert released("default") > 20  # glibc unmaps a freed 24 MiB tensor at once
    assert released("keep") < 10  # kept: the next step's tensors reuse it, no page faults
