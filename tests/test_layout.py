"""The layout stays readable: no import cycles, small files."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import grimp

SRC = Path(__file__).parents[1] / "src" / "llmkit"
LIMIT = 330  # lines, for every file alike


def test_no_module_imports_one_that_imports_it_back():
    graph = grimp.build_graph("llmkit")
    cycles = sorted(
        f"{a} -> {b} -> ... -> {a}"
        for a in graph.modules
        for b in graph.find_modules_directly_imported_by(a)
        if graph.chain_exists(importer=b, imported=a)
    )
    assert cycles == []


def test_files_stay_small():
    too_long = []
    for path in SRC.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        if lines > LIMIT:
            too_long.append(f"{path.relative_to(SRC)}: {lines} lines (limit {LIMIT})")
    assert too_long == []


# Python's own errors llmkit raises where they are the right answer to a caller: a bad value
# or type (ParamError is a ValueError), a missing key, an interface method to override, an OS
# or memory failure, the end of an iterator. Anything else (RuntimeError, Exception) is one of
# llmkit's errors (llmkit/errors.py).
CALLER_ERRORS = (
    ValueError, TypeError, LookupError, NotImplementedError, OSError, MemoryError,
    AttributeError, StopIteration, StopAsyncIteration, SystemExit, AssertionError,
)  # fmt: skip


def test_every_raise_is_a_caller_error_or_one_of_llmkits():
    builtin_errors = {n: v for n, v in vars(builtins).items() if isinstance(v, type)}
    odd = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                error = builtin_errors.get(call.id) if isinstance(call, ast.Name) else None
                if error is not None and not issubclass(error, CALLER_ERRORS):
                    odd.append(f"{path.relative_to(SRC)}:{node.lineno}: {error.__name__}")
    assert odd == []


def test_the_top_level_holds_only_public_import_points():
    """A module at the top of src/llmkit is one users import: the home of a name the package
    exports (``llmkit.__init__``'s map) or a module the API reference documents; internal
    modules live in the packages they serve."""
    import llmkit

    homes = {path.split(".")[1] for path in llmkit._EXPORTS.values()}
    reference = SRC.parents[1] / "docs" / "reference"
    documented = {
        line.split()[1].split(".")[1]
        for page in reference.glob("*.md")
        for line in page.read_text().splitlines()
        if line.startswith("::: llmkit.")
    }
    modules = {path.stem for path in SRC.glob("*.py")} - {"__init__"}
    assert sorted(modules - homes - documented) == []


# The folders of tests/ that are not a package of the tree, and what they hold.
NOT_PACKAGES = {
    "data": "files the tests read",
    "docs": "the documentation site",
    "examples": "the examples/ folder",
    "gpu": "the CUDA paths, run where a GPU is",
}


def test_the_tests_are_laid_out_as_the_source():
    """A folder of tests is the package it tests, at the same path (tests/engine/core/ for
    llmkit/engine/core/); a test at the top tests a top-level module or the whole tree."""
    tests = Path(__file__).parent
    folders = (d.relative_to(tests) for d in tests.rglob("*") if d.is_dir())
    strays = [
        str(d)
        for d in folders
        if "__pycache__" not in d.parts
        and d.parts[0] not in NOT_PACKAGES
        and not (SRC / d / "__init__.py").is_file()
    ]
    assert strays == []
