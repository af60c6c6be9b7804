"""The C kernels are compiled when the package is installed, one library per instruction-set
variant, and a start loads the widest this CPU runs without compiling anything."""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys

import pytest

from llmkit.kernels.cpu import SOURCES, build, loader
from llmkit.model.layers.weights import kq, mxfp4, q8, w4a8

V3 = "fpu sse2 avx avx2 bmi1 bmi2 f16c fma movbe".split()
V4 = [*V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"]
x86 = pytest.mark.skipif(
    platform.machine() != "x86_64" or not loader.variants()[0].needs,
    reason="the prebuilt variants are x86-64 ones, for a CPU with AVX2 at least",
)


@pytest.mark.parametrize(
    "flags, names",
    [
        (V3, ["avx2"]),  # Zen 2/3, Haswell to Comet Lake
        ([*V3, "avx_vnni"], ["avx-vnni", "avx2"]),  # Alder Lake
        ([*V4, "avx512_vnni", "avx_vnni"], ["avx512-vnni", "avx-vnni", "avx2"]),  # Sapphire R.
        ([*V4, "avx512_vnni"], ["avx512-vnni", "avx2"]),  # Zen 4, Ice Lake
        ("fpu sse2 avx".split(), ["native"]),  # Sandy Bridge: no AVX2
        ("fp asimd sve".split(), ["native"]),  # an Arm server
    ],
)
def test_a_cpu_runs_the_variants_its_flags_allow_widest_first(flags, names):
    assert [v.name for v in build.runnable(frozenset(flags))] == names


@x86
@pytest.mark.parametrize("kernel", [w4a8, q8, kq, mxfp4], ids=lambda m: m.KERNEL.name)
def test_each_variant_multiplies_with_its_own_instructions(kernel):
    for variant in loader.variants():
        assert kernel.KERNEL.path(variant.name) == variant.name


@x86
def test_the_install_built_every_kernel_for_every_variant():
    manifest = json.loads((loader.PREBUILT / build.MANIFEST).read_text())
    assert manifest["digest"] == build.digest(SOURCES), (
        "the C sources changed since this checkout was installed: pip install -e . again"
    )
    want = {build.library_name(s, v) for s in build.kernels(SOURCES) for v in build.VARIANTS}
    assert set(manifest["libraries"]) == want
    assert all((loader.PREBUILT / name).is_file() for name in want)


LOAD_EVERY_KERNEL = """
import logging
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
from llmkit.model.attention import paged_decode_cpu
from llmkit.model.layers import gated_delta_cpu
from llmkit.model.layers.weights import kq, mxfp4, q8, w4a8
from llmkit.model.models import llama_fused
weights = (kq.KERNEL, mxfp4.KERNEL, q8.KERNEL, w4a8.KERNEL)
kernels = (paged_decode_cpu, gated_delta_cpu, *weights, llama_fused)
assert all(kernel.load() is not None for kernel in kernels)
"""


@x86
def test_a_start_compiles_nothing(tmp_path):
    """With no compiler and an empty home, every kernel loads, from the package."""
    env = {**os.environ, "HOME": str(tmp_path), "CC": str(tmp_path / "no-such-cc")}
    run = subprocess.run(
        [sys.executable, "-c", LOAD_EVERY_KERNEL], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    widest = loader.variants()[0].name
    for source in build.kernels(SOURCES):
        assert f"C kernel {source.stem}: {widest}, built at install" in run.stderr
    assert "compiling" not in run.stderr and not (tmp_path / ".cache").exists()


@x86
def test_changed_sources_are_compiled_once_at_run_time(tmp_path, monkeypatch, caplog):
    """An editable checkout whose C changed since install: the stale libraries are not
    loaded; the kernel is compiled for this CPU's widest variant once, then cached."""
    stale = tmp_path / "prebuilt"
    stale.mkdir()
    (stale / build.MANIFEST).write_text(json.dumps({"digest": "old", "libraries": []}))
    monkeypatch.setattr(loader, "PREBUILT", stale)
    monkeypatch.setenv("HOME", str(tmp_path))
    caplog.set_level(logging.INFO, logger=loader.__name__)
    for _ in range(2):
        assert loader.load_function(q8.KERNEL.source, "q8_path", []) is not None
    compiled = [r for r in caplog.records if r.getMessage().startswith("compiling the q8")]
    assert len(compiled) == 1
    assert len(list((tmp_path / ".cache" / "llmkit" / "kernels").glob("q8-*.so"))) == 1
