"""Small plugin distributions, built and installed with pip into a folder of their own
that only the subprocesses given its environment see (no entry point leaks into the
test process): one of plugins that are each wrong in one way, one that shadows a
built-in name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

BAD_PLUGINS = '''
"""Plugins that are each wrong in one way."""

from llmkit.plugin_api import Scan, ToolParser


def parse_function(text, final):
    """A function where a ToolParser class is expected."""


NOT_A_PARSER = "a string where a reasoning parser class is expected"

BAD_TEMPLATE = "{% for message in messages %}{{ message.content }}"


class RaisingParser(ToolParser):
    def scan(self, text: str, final: bool) -> Scan:
        raise RuntimeError("kaboom in the plugin")


class FutureParser(ToolParser):
    requires_llmkit_plugin_api = 99

    def scan(self, text: str, final: bool) -> Scan:
        return Scan(text, [])
'''

BAD_ENTRY_POINTS = {
    "llmkit.tool_parsers": {
        "wrong_kind": "llmkit_bad_plugins:parse_function",
        "raising": "llmkit_bad_plugins:RaisingParser",
        "future_api": "llmkit_bad_plugins:FutureParser",
    },
    "llmkit.reasoning_parsers": {"wrong_kind": "llmkit_bad_plugins:NOT_A_PARSER"},
    "llmkit.chat_templates": {"jinja_error": "llmkit_bad_plugins:BAD_TEMPLATE"},
}

SHADOW_PLUGINS = 'TEMPLATE = "SHADOW {{ messages[0].content }}"\n'
SHADOW_ENTRY_POINTS = {"llmkit.chat_templates": {"chatml": "llmkit_shadow_plugins:TEMPLATE"}}


def _project(root: Path, name: str, module: str, source: str, eps: dict) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / f"{module}.py").write_text(textwrap.dedent(source))
    groups = "".join(
        f'\n[project.entry-points."{group}"]\n'
        + "".join(f'{ep} = "{target}"\n' for ep, target in targets.items())
        for group, targets in eps.items()
    )
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "0.1"\n'
        f'[tool.setuptools]\npy-modules = ["{module}"]\n{groups}'
    )
    return folder


def install_plugin_dists(root: Path) -> dict[str, str]:
    """Builds and installs both distributions under ``root``; the environment that sees them."""
    projects = [
        _project(root, "llmkit-bad-plugins", "llmkit_bad_plugins", BAD_PLUGINS, BAD_ENTRY_POINTS),
        _project(
            root, "llmkit-shadow-plugins", "llmkit_shadow_plugins", SHADOW_PLUGINS,
            SHADOW_ENTRY_POINTS,
        ),
    ]  # fmt: skip
    target = root / "site"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
            "--no-build-isolation", "--target", str(target), *map(str, projects),
        ],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    path = os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}
