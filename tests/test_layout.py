"""The layout stays readable: no import cycles, small files."""

from __future__ import annotations

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
