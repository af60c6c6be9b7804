"""The Layout page (docs/layout.md) names the tree as it is: every folder and module it lists
exists, and every package folder of src/llmkit is listed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[2]
SRC = ROOT / "src" / "llmkit"
# Lines indented this far or more go on describing the entry above them.
DESCRIPTION_COLUMN = 16


def listed_paths(page: str) -> Iterator[tuple[Path, bool]]:
    """Each folder (``name/``: True) and module (``name.py``: False) in the name column of
    the Layout block; an entry indented under a single folder is inside it."""
    block = page.split("```", 2)[1]
    parents: list[tuple[int, Path]] = []  # (indent, folder) of the entries above, outermost first
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent >= DESCRIPTION_COLUMN:
            continue
        while parents and parents[-1][0] >= indent:
            parents.pop()
        base = parents[-1][1] if parents else ROOT
        names = [n for n in re.split(r" {2,}", line.strip())[0].split() if n.endswith(("/", ".py"))]
        for name in names:
            yield base / name, name.endswith("/")
        folders = [base / n for n in names if n.endswith("/")]
        if len(folders) == 1:
            parents.append((indent, folders[0]))


LISTED = dict(listed_paths((ROOT / "docs" / "layout.md").read_text()))


def test_the_layout_is_read_as_a_tree():
    assert LISTED[SRC] and LISTED[SRC / "engine" / "sched"] and not LISTED[SRC / "http.py"]


def test_every_folder_and_module_listed_exists():
    missing = [
        str(path.relative_to(ROOT))
        for path, folder in LISTED.items()
        if not (path.is_dir() if folder else path.is_file())
    ]
    assert missing == []


def test_every_package_folder_is_listed():
    packages = {init.parent for init in SRC.rglob("__init__.py")} - {SRC}
    unlisted = sorted(str(p.relative_to(SRC)) for p in packages if not LISTED.get(p))
    assert unlisted == []
