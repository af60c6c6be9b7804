"""Load a C kernel for this CPU: the one the package's build step compiled, else one compiled
now and cached.

:func:`load_function` takes the widest variant of :data:`build.VARIANTS` this CPU runs. Its
library comes from ``prebuilt/`` (compiled when the package was installed) when that was
built from the sources as they are now; otherwise (an editable checkout whose C changed, a
CPU no variant fits) it is compiled with ``$CC`` (else ``cc``/``gcc``) into
``~/.cache/llmkit/kernels``, keyed by the sources, the flags, the compiler's version and the
CPU's flags. With neither, or when the build or load fails (a source may refuse a CPU it has
no code for with ``#error``), it returns None and the caller keeps its torch path.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from llmkit.kernels.cpu import SOURCES
from llmkit.kernels.cpu.build import (
    MANIFEST,
    PATHS,
    Variant,
    compile_kernel,
    cpu_flags,
    digest,
    library_name,
    runnable,
)

logger = logging.getLogger(__name__)

PREBUILT = SOURCES / "prebuilt"


@functools.cache
def variants() -> tuple[Variant, ...]:
    """The variants this CPU runs, widest first."""
    return tuple(runnable(cpu_flags()))


@functools.cache
def _sources_digest() -> str:
    return digest(SOURCES)


@functools.cache
def _built_in(where: Path) -> frozenset[str]:
    """The libraries the build step left in ``where`` from the sources as they are now (none
    where its manifest is missing or names other sources); read once a process."""
    try:
        manifest = json.loads((where / MANIFEST).read_text())
    except (OSError, ValueError):
        return frozenset()
    if manifest.get("digest") != _sources_digest():
        return frozenset()
    return frozenset(manifest.get("libraries", ()))


def prebuilt(source: Path, variant: Variant) -> Path | None:
    """The library the package's build step compiled for ``source`` and ``variant``, or None
    where there is none or it was built from other sources than these."""
    name = library_name(source, variant)
    return PREBUILT / name if name in _built_in(PREBUILT) else None


def _compiled(source: Path, variant: Variant) -> Path | None:
    """The library compiled now (once, then cached) for ``source`` and ``variant``, or None
    with no compiler. Raises where the compiler refuses."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    version = subprocess.run(
        [compiler, "--version"], capture_output=True, text=True, timeout=30
    ).stdout
    key = "\0".join([_sources_digest(), *variant.flags, version, *sorted(cpu_flags())])
    name = f"{source.stem}-{variant.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"
    target = Path.home() / ".cache" / "llmkit" / "kernels" / name
    if not target.exists():
        logger.info(
            "compiling the %s kernel for %s (once, into %s)", source.stem, variant.name, target
        )
        compile_kernel(compiler, source, variant, target)
    return target


def load_function(
    source: Path, name: str, argtypes: Sequence[type], variant: str | None = None
) -> Callable[..., int] | None:
    """C function ``name`` (returning int) of the kernel ``source`` built for ``variant``
    (by default the widest this CPU runs; a narrower one to test it), or None where it
    cannot be had here. Callers cache it."""
    chosen = next((v for v in variants() if variant in (None, v.name)), None)
    if chosen is None or not source.exists():
        return None
    try:
        library = prebuilt(source, chosen)
        if library is not None:
            logger.info("C kernel %s: %s, built at install", source.stem, chosen.name)
        else:
            library = _compiled(source, chosen)
            if library is None:
                logger.warning(
                    "C kernel %s unavailable (no C compiler), using torch ops", source.stem
                )
                return None
        function = getattr(ctypes.CDLL(str(library)), name)
    except (OSError, AttributeError, subprocess.SubprocessError) as exc:
        logger.warning("C kernel %s unavailable, using torch ops: %s", source.name, exc)
        return None
    function.restype = ctypes.c_int
    function.argtypes = list(argtypes)
    return function


def instruction_path(source: Path, name: str, variant: str | None = None) -> str | None:
    """Which of :data:`build.PATHS` the kernel ``source`` built for ``variant`` multiplies
    with (its C function ``name`` says), or None where it cannot be had here."""
    which = load_function(source, name, [], variant)
    return None if which is None else PATHS[which()]


def builds_here(source: Path, name: str) -> dict[str, str]:
    """Each instruction path the kernel ``source`` runs on this CPU, with the variant that
    builds it; empty where it cannot be had here."""
    found: dict[str, str] = {}
    for variant in variants():
        path = instruction_path(source, name, variant.name)
        if path is not None:
            found.setdefault(path, variant.name)
    return found
