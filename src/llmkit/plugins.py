"""Plugins found through Python entry points, loaded lazily by name.

Three groups: ``llmkit.tool_parsers`` (tool-call parser classes), ``llmkit.chat_templates``
(Jinja chat template strings) and ``llmkit.reasoning_parsers`` (reasoning parser classes).
llmkit's own parsers and templates are entry points of its distribution, like any plugin's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from llmkit.errors import PluginError

TOOL_PARSERS = "llmkit.tool_parsers"
CHAT_TEMPLATES = "llmkit.chat_templates"
REASONING_PARSERS = "llmkit.reasoning_parsers"
GROUPS = (TOOL_PARSERS, CHAT_TEMPLATES, REASONING_PARSERS)


@dataclass(frozen=True)
class Plugin:
    """One entry point: its group, name, target (``module:attr``) and distribution."""

    group: str
    name: str
    value: str
    distribution: str

    def describe(self) -> str:
        return f"entry point {self.name} = {self.value} ({self.group}) of {self.distribution}"


def _plugin(group: str, ep: EntryPoint) -> Plugin:
    dist = ep.dist
    where = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "an unknown package"
    return Plugin(group, ep.name, ep.value, where)


def installed(group: str) -> dict[str, list[Plugin]]:
    """The entry points of ``group`` by name; a name offered twice lists both."""
    if group not in GROUPS:
        raise ValueError(f"unknown plugin group {group!r}; the groups are {', '.join(GROUPS)}")
    found: dict[str, list[Plugin]] = {}
    seen: set[tuple[str, str, str]] = set()
    for ep in entry_points(group=group):
        plugin = _plugin(group, ep)
        # The same distribution found twice on sys.path (an editable install) is one plugin.
        key = (plugin.name, plugin.value, plugin.distribution)
        if key not in seen:
            seen.add(key)
            found.setdefault(ep.name, []).append(plugin)
    return dict(sorted(found.items()))


def load(group: str, name: str) -> Any:
    """The object the entry point ``name`` of ``group`` names, imported on first use.

    Raises PluginError when no installed distribution offers ``name``, when two do, or
    when importing it fails; the message names the entry point and its distribution.
    """
    return _load(group, name)


@functools.cache
def _load(group: str, name: str) -> Any:
    candidates = installed(group).get(name)
    if not candidates:
        names = ", ".join(installed(group)) or "none"
        raise PluginError(
            f"no {group} plugin named {name!r} is installed (installed: {names}; "
            "`llmkit plugins` lists them)"
        )
    if len(candidates) > 1:
        raise PluginError(
            f"{group} plugin {name!r} is offered by several distributions: "
            + "; ".join(p.describe() for p in candidates)
        )
    plugin = candidates[0]
    try:
        return EntryPoint(plugin.name, plugin.value, group).load()
    except Exception as exc:
        raise PluginError(
            f"plugin {name!r} failed to load: {plugin.describe()}: {type(exc).__name__}: {exc}"
        ) from exc
