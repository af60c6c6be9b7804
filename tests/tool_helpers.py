"""For the tool-calling tests: tools with bounded schemas, a broken plugin, a model
without a chat template."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

# Bounded, so that a random model constrained to them finishes well within max_tokens.
SCHEMAS = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"enum": ["Paris", "Oslo", "Lima"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    },
    "get_time": {
        "type": "object",
        "properties": {"tz": {"enum": ["CET", "UTC"]}},
        "required": ["tz"],
        "additionalProperties": False,
    },
}
TOOLS = [
    {"type": "function", "function": {"name": name, "description": name, "parameters": schema}}
    for name, schema in SCHEMAS.items()
]


def schema_of(name: str) -> dict:
    return SCHEMAS[name]


def broken_plugin_env(root: Path) -> dict[str, str]:
    """An environment in which the distribution llmkit-broken-plugin is installed: its
    tool parser ``broken`` raises on import. importlib.metadata finds it on PYTHONPATH."""
    dist = root / "llmkit_broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: llmkit-broken-plugin\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[llmkit.tool_parsers]\nbroken = broken_llmkit_plugin:Parser\n"
    )
    (root / "broken_llmkit_plugin.py").write_text('raise RuntimeError("boom")\n')
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def without_template(model: str, root: Path) -> str:
    """A copy of ``model`` whose tokenizer has no chat template."""
    copy = root / "no-template"
    shutil.copytree(model, copy)
    (copy / "chat_template.jinja").unlink(missing_ok=True)
    config = copy / "tokenizer_config.json"
    data = json.loads(config.read_text())
    data.pop("chat_template", None)
    config.write_text(json.dumps(data))
    return str(copy)
