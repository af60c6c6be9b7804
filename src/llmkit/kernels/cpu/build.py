"""Compile llmkit's C kernels for CPU: each kernel for each instruction-set variant.

The package's build step (``setup.py``) compiles every kernel for every x86 variant into
``prebuilt/`` beside the sources, as llama.cpp's ``GGML_CPU_ALL_VARIANTS`` builds do, and
:mod:`llmkit.kernels.cpu.loader` picks the widest variant the running CPU has; so a wheel
runs on a machine without a compiler and no start compiles anything. The same flags build a
kernel at run time where no prebuilt one fits (an editable checkout whose C sources changed
since install, a CPU none of the variants fit).

This module uses the standard library only: the build step loads it by path, before llmkit
or its dependencies are installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# Not -ffast-math: linking with it adds crtfastmath, which sets flush-to-zero for the whole
# process when the library loads. These let the loops vectorize and change nothing outside
# the kernels. -fopenmp links libgomp.so.1 by that name; loaded after torch (whose CPU build
# ships and loads a libgomp.so.1), the dynamic loader hands the kernels torch's copy, so
# their parallel regions run on torch's own OpenMP threads instead of competing with them.
FLAGS = (
    "-O3",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fPIC",
    "-shared",
    "-pthread",
    "-fopenmp",
)
MANIFEST = "manifest.json"
# The weight-kernel registry's facts, which C reads as the header it writes: formats.h.
TABLE = Path(__file__).resolve().parents[2] / "model" / "layers" / "weights" / "table.py"
HEADER = "formats.h"
_V3 = frozenset("avx avx2 bmi1 bmi2 f16c fma movbe".split())  # x86-64-v3, as cpuinfo names it
_V4 = _V3 | frozenset("avx512f avx512bw avx512cd avx512dq avx512vl".split())


@dataclass(frozen=True)
class Variant:
    """One instruction set the kernels are built for: its compiler flags and the
    ``/proc/cpuinfo`` flags a CPU needs to run it. A tiled kernel's ``*_path()`` answers the
    name of the widest variant it has code for."""

    name: str
    flags: tuple[str, ...]
    needs: frozenset[str]


# Widest first. The names are the tiled kernels' instruction paths (w4a8.c, q8.c, kq.c, ...).
VARIANTS = (
    Variant("avx512-vnni", ("-march=x86-64-v4", "-mavx512vnni"), _V4 | {"avx512_vnni"}),
    Variant("avx-vnni", ("-march=x86-64-v3", "-mavxvnni"), _V3 | {"avx_vnni"}),
    Variant("avx2", ("-march=x86-64-v3",), _V3),
)
PATHS = tuple(v.name for v in reversed(VARIANTS))  # the tiled kernels' paths, narrowest first
# Where no variant fits (another architecture, an x86 CPU without AVX2): this machine's own
# instructions, compiled at run time. Kernels with no code for it refuse it with #error.
NATIVE = Variant("native", ("-march=native",), frozenset())


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags, as ``/proc/cpuinfo`` lists them (empty where it cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def runnable(flags: frozenset[str]) -> list[Variant]:
    """The variants a CPU with these feature flags runs, widest first (NATIVE alone where
    none of the x86 variants fits)."""
    return [v for v in VARIANTS if v.needs <= flags] or [NATIVE]


def kernels(sources: Path) -> list[Path]:
    """The kernels: each C file beside this module is one shared library."""
    return sorted(sources.glob("*.c"))


def digest(sources: Path) -> str:
    """A hash of every C source and header and of the registry's table (the header written
    from it): a kernel includes its neighbours (llama_decode.c includes w4a8.c), so any
    change to one rebuilds them all."""
    files = [*sorted([*sources.glob("*.c"), *sources.glob("*.h")]), TABLE]
    return hashlib.sha256(b"".join(f.name.encode() + f.read_bytes() for f in files)).hexdigest()


def header() -> str:
    """``formats.h``'s text: the registry's table (loaded by path: the build step runs
    before llmkit is installed) as C enums."""
    spec = importlib.util.spec_from_file_location("_llmkit_weight_table", TABLE)
    assert spec is not None and spec.loader is not None
    table = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = table  # dataclasses look their module up while being made
    spec.loader.exec_module(table)
    return str(table.header())


def library_name(source: Path, variant: Variant) -> str:
    return f"{source.stem}-{variant.name}.so"


def compile_kernel(compiler: str, source: Path, variant: Variant, target: Path) -> None:
    """``source`` compiled with ``variant``'s flags into ``target``, atomically (a concurrent
    build never loads half a file), with the registry's :func:`header` written beside it.
    Raises CalledProcessError where the compiler refuses."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        (Path(tmp) / HEADER).write_text(header())
        subprocess.run(
            [compiler, *FLAGS, *variant.flags, "-I", tmp, str(source), "-o", str(built), "-lm"],
            check=True,
            capture_output=True,
            timeout=300,
        )
        os.replace(built, target)


def build_all(
    compiler: str, sources: Path, out: Path, variants: Iterable[Variant] = VARIANTS
) -> list[Path]:
    """Every kernel in ``sources`` for every variant, into ``out``, with a manifest naming
    the sources' digest and what was built (a kernel that refuses a variant is left out);
    compiled in parallel. Returns the files written."""
    jobs = [(source, variant) for variant in variants for source in kernels(sources)]

    def one(job: tuple[Path, Variant]) -> Path | None:
        source, variant = job
        target = out / library_name(source, variant)
        try:
            compile_kernel(compiler, source, variant, target)
        except subprocess.CalledProcessError:
            return None
        return target

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = [path for path in pool.map(one, jobs) if path is not None]
    manifest = out / MANIFEST
    manifest.write_text(
        json.dumps({"digest": digest(sources), "libraries": sorted(p.name for p in built)})
    )
    return [*built, manifest]
