"""The documentation site builds with warnings as errors (mkdocs.yml: ``strict``): every
page in the nav, every link and anchor found, every API reference entry resolved."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import llmkit

ROOT = Path(__file__).parents[2]
REFERENCE = ROOT / "docs" / "reference"


def test_the_site_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "reference" / "engine" / "index.html").is_file()


def test_the_reference_documents_every_public_name():
    documented = set(re.findall(r"^::: ([\w.]+)$", "".join(
        p.read_text() for p in REFERENCE.glob("*.md")), re.M))  # fmt: skip
    names = {f"llmkit.{name}" for name in llmkit.__all__ if name != "__version__"}
    modules = {"llmkit.http", "llmkit.unix", "llmkit.websocket", "llmkit.grpc"}
    modules |= {"llmkit.replicas", "llmkit.models", "llmkit.plugin_api"}
    assert names | modules == documented
