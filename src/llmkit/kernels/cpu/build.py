"""Build, cache and load the small C kernels the CPU paths use, with the system compiler.

Each kernel is one C file shipped with the package. It is compiled on first use with
``$CC`` (else ``cc``/``gcc``) for this CPU (``-march=native``) into
``~/.cache/llmkit/kernels``, keyed by the source, the flags, the compiler's version and the
CPU's feature flags, so a changed source, compiler or machine gets its own build. With no
compiler, or when the build or load fails (a source may refuse a CPU it has no code for with
``#error``), :func:`load_function` returns None and the caller keeps its torch path.

Kernels are built with ``-fopenmp`` and link libgomp.so.1 by that name; loaded after torch
(whose CPU build ships and loads a libgomp.so.1), the dynamic loader hands them torch's copy,
so their parallel regions run on torch's own OpenMP threads instead of competing with them.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

# Not -ffast-math: linking with it adds crtfastmath, which sets flush-to-zero for the whole
# process when the library loads. These let the loops vectorize and change nothing outside
# the kernels.
FLAGS = (
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fPIC",
    "-shared",
    "-pthread",
    "-fopenmp",
)
# The instruction paths a tiled kernel (w4a8.c, q8.c) can build with, as its ``*_path()``
# answers them (0, 1, 2), and the flags that leave each narrower one on a machine that has
# a wider (each drops the wider instructions), so tests check every path this CPU runs.
PATHS = ("avx2", "avx-vnni", "avx512-vnni")
NARROWER = {
    "avx-vnni": ("-mno-avx512vnni",),
    "avx2": ("-mno-avx512vnni", "-mno-avxvnni"),
}


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return ""


def _build(compiler: str, flags: list[str], source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        subprocess.run(
            [compiler, *flags, str(source), "-o", str(built), "-lm"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        os.replace(built, target)  # atomic: a concurrent build never loads half a file


def load_function(
    source: Path, name: str, argtypes: Sequence[type], extra_flags: Sequence[str] = ()
) -> Callable[..., int] | None:
    """C function ``name`` (returning int) of ``source`` compiled for this machine (built
    once, then cached), or None where it cannot be built or loaded here. Callers cache it.
    ``extra_flags`` follow ``-march=native`` (``-mno-avx512vnni`` builds a narrower path, to
    test it on a machine that would pick a wider one)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not source.exists():
        return None
    try:
        version = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
        # Every C file beside it too: a kernel may include them (llama_decode.c does w4a8.c).
        beside = b"".join(f.read_bytes() for f in sorted(source.parent.glob("*.[ch]")))
        key = hashlib.sha256(
            source.read_bytes()
            + beside
            + "\0".join([*FLAGS, *extra_flags, version, _cpu_flags()]).encode()
        ).hexdigest()[:16]
        target = Path.home() / ".cache" / "llmkit" / "kernels" / f"{source.stem}-{key}.so"
        if not target.exists():
            logger.info("compiling the %s kernel for this CPU (once, into %s)", source.stem, target)
            _build(compiler, [*FLAGS, *extra_flags], source, target)
        function = getattr(ctypes.CDLL(str(target)), name)
    except (OSError, AttributeError, subprocess.SubprocessError) as exc:
        logger.warning("C kernel %s unavailable, using torch ops: %s", source.name, exc)
        return None
    function.restype = ctypes.c_int
    function.argtypes = list(argtypes)
    return function


def instruction_path(source: Path, name: str, extra_flags: Sequence[str] = ()) -> str | None:
    """Which of :data:`PATHS` the kernel ``source`` built with ``extra_flags`` multiplies
    with (its C function ``name`` says), or None where it does not build here."""
    which = load_function(source, name, [], extra_flags)
    return None if which is None else PATHS[which()]


def builds_here(source: Path, name: str) -> dict[str, tuple[str, ...]]:
    """Each path of :data:`PATHS` the kernel ``source`` runs on this CPU, with the extra
    flags that build it (none for the widest); empty where it does not build here."""
    widest = instruction_path(source, name)
    if widest is None:
        return {}
    found: dict[str, tuple[str, ...]] = {widest: ()}
    for path, flags in NARROWER.items():
        if instruction_path(source, name, flags) == path:
            found.setdefault(path, flags)
    return found
