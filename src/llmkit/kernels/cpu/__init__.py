"""llmkit's C kernels for CPU (quantized matmuls, the fused decode step, paged decode
attention, the gated delta rule), one C file each: compiled for every x86 variant when the
package is built (:mod:`~llmkit.kernels.cpu.build`), loaded for this CPU by
:mod:`~llmkit.kernels.cpu.loader`."""

from __future__ import annotations

from pathlib import Path

SOURCES = Path(__file__).parent
