"""The weight-kernel registry: one table that Python binds and C compiles against.

C numbers the kernels, kq's layouts and the GGUF types through the header the kernel build
writes from ``weights/table.py``; no C source keeps a copy. The quantization methods that
are a kernel's format are layers of that format, read by the fused decode step like a
GGUF file's."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
import torch
from tests.model.layers.weights.kquant_blocks import quantize
from torch import nn

from llmkit.config.checks import QUANTIZATIONS
from llmkit.kernels.cpu import SOURCES, build
from llmkit.model.layers.native import NativeLinear
from llmkit.model.layers.quant import quantized_linear
from llmkit.model.layers.weights import table
from llmkit.model.layers.weights.registry import FORMATS, KERNELS, METHODS, fused_view
from llmkit.model.models.llama_fused_view import linear


def test_every_format_is_bound_to_the_kernel_the_table_names():
    assert list(FORMATS) == [f.name for f in table.FORMATS]
    for fmt in FORMATS.values():
        assert fmt.kernel is KERNELS[fmt.spec.kernel] and fmt.kernel.name == fmt.spec.kernel
    assert {m: f.name for m, f in METHODS.items()} == table.METHODS
    # The options EngineConfig takes: torch's int8 and int4, and the registry's methods.
    assert set(QUANTIZATIONS) == {"int8", "int4", *METHODS}


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_c_reads_the_numbers_python_passes(tmp_path):
    """A program compiled against the build's header prints its numbers: they are the
    table's (the kind a fused Part names, kq's layout, a packer's type, a block's bytes)."""
    (tmp_path / build.HEADER).write_text(build.header())
    kq = table.layouts("kq")
    printed = [f"KQ_{lay.replace('_', '')}" for lay in kq]
    printed += [k.upper() for k in table.KERNELS]
    printed += [f"G_{f.name}" for f in table.FORMATS]
    printed += [f"BLOCK_BYTES_{f.name}" for f in table.FORMATS]
    body = "".join(f'printf("%d\\n", (int)({name}));' for name in printed)
    source = tmp_path / "numbers.c"
    source.write_text(f'#include <stdio.h>\n#include "formats.h"\nint main(void) {{{body}}}\n')
    subprocess.run(["cc", "-I", str(tmp_path), str(source), "-o", str(tmp_path / "n")], check=True)
    out = subprocess.run([str(tmp_path / "n")], capture_output=True, text=True, check=True)
    want = [*range(len(kq)), *range(len(table.KERNELS)), *range(len(table.FORMATS))]
    want += [f.block_bytes for f in table.FORMATS]
    assert [int(v) for v in out.stdout.split()] == want
    assert [FORMATS[f.name].spec.number for f in table.FORMATS] == list(range(len(FORMATS)))


def test_no_c_source_keeps_its_own_copy_of_the_table():
    names = "|".join(["G_Q\\w+", "KQ_Q\\w+", *(k.upper() for k in table.KERNELS)])
    declared = re.compile(rf"enum\s*{{[^}}]*\b({names})\s*=")
    sources = [*SOURCES.glob("*.c"), *SOURCES.glob("*.h")]
    assert sources and not [p.name for p in sources if declared.search(p.read_text())]
    assert not (SOURCES / build.HEADER).exists()  # written by the build, never kept


def test_the_build_rebuilds_when_the_table_changes(tmp_path, monkeypatch):
    before = build.digest(SOURCES)
    changed = tmp_path / "table.py"
    changed.write_text(table.__loader__.get_source(table.__name__) + "\n# another format\n")
    monkeypatch.setattr(build, "TABLE", changed)
    assert build.digest(SOURCES) != before


@pytest.mark.parametrize("method", list(METHODS))
def test_a_quantization_method_is_a_layer_of_its_format_the_fused_step_reads(method):
    torch.manual_seed(0)
    float_layer = nn.Linear(96, 40, bias=False)
    layer = quantized_linear(float_layer, method, 32)
    assert isinstance(layer, NativeLinear)
    (part,) = layer.parts
    assert part.format is METHODS[method]
    view = linear(layer)
    assert view is not None and view.parts == 1
    kind, fused = fused_view(part.packed)
    assert view.part[0].kind == kind == table.KERNELS.index(part.format.kernel.name)
    assert fused.padded_inputs == view.Kp == 96


def _file_rows(name: str, n: int, k: int) -> torch.Tensor:
    """``n`` rows of ``k`` inputs as a GGUF file holds them in type ``name``."""
    rng = np.random.default_rng(0)
    if name == "MXFP4":  # a block: an E8M0 exponent near 1.0, then 16 bytes of codes
        blocks = rng.integers(0, 256, (n, k // 32, 17), dtype=np.uint8)
        blocks[..., 0] = rng.integers(122, 130, (n, k // 32))
        return torch.from_numpy(blocks.reshape(n, -1))
    return torch.from_numpy(quantize(rng.standard_normal((n, k)).astype(np.float32), name))


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_part_writes_its_columns_of_a_stacked_output_and_no_others(name):
    """A stacked layer's parts write into their columns of one output (no concatenation): the
    same numbers as alone, and a last tile's spare columns never reach the next part's."""
    n, k, fmt = 21, 256, FORMATS[name]
    packed = fmt.read(_file_rows(name, n, k), k)
    x = torch.randn(5, k, generator=torch.Generator().manual_seed(1))
    stacked = torch.full((5, 4 + n + 11), float("nan"))
    fmt.linear(x, packed, n, out=stacked[:, 4 : 4 + n])
    assert torch.equal(stacked[:, 4 : 4 + n], fmt.linear(x, packed, n))
    assert stacked[:, :4].isnan().all() and stacked[:, 4 + n :].isnan().all()
