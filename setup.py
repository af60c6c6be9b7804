"""The package's one build step beyond pyproject.toml: llmkit's C kernels for CPU compiled
for every x86 variant into ``llmkit/kernels/cpu/prebuilt/`` (see that package's build.py),
for a wheel and for an editable install alike, so that no start compiles anything."""

from __future__ import annotations

import importlib.util
import logging
import os
import platform
import shutil
import sys
from pathlib import Path
from types import ModuleType

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

PACKAGE = "llmkit.kernels.cpu"
SOURCES = Path(__file__).parent / "src" / "llmkit" / "kernels" / "cpu"


def _kernel_build() -> ModuleType:
    """llmkit's kernels/cpu/build.py, loaded by path: llmkit is not installed yet."""
    spec = importlib.util.spec_from_file_location("_llmkit_kernel_build", SOURCES / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


class BuildKernels(build_ext):
    """``build_ext`` for shared libraries that ctypes loads rather than Python extensions."""

    def run(self) -> None:
        self._outputs: list[str] = []
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if platform.machine().lower() not in ("x86_64", "amd64") or compiler is None:
            logging.warning("llmkit: C kernels not prebuilt (no x86-64 or no compiler here)")
            return
        # An editable install's beside the sources it imports; a wheel's in its build tree.
        out = SOURCES if self.inplace else Path(self.build_lib, *PACKAGE.split("."))
        built = _kernel_build().build_all(compiler, SOURCES, out / "prebuilt")
        self._outputs = [str(path) for path in built] if not self.inplace else []

    def get_outputs(self) -> list[str]:
        return getattr(self, "_outputs", [])

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class BinaryDistribution(Distribution):
    """A platform wheel: it holds machine code."""

    def has_ext_modules(self) -> bool:
        return True


setup(distclass=BinaryDistribution, cmdclass={"build_ext": BuildKernels})
