"""llmkit's C kernels for CPU (w4a8 and q8 matmuls, paged decode attention), one C file each,
compiled for this machine on first use by :mod:`llmkit.kernels.cpu.build`."""

from __future__ import annotations

from pathlib import Path

SOURCES = Path(__file__).parent
