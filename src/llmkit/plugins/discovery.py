"""Plugins found through Python entry points, loaded lazily by name and checked at load.

Three groups: ``llmkit.tool_parsers`` (tool-call parser classes), ``llmkit.chat_templates``
(Jinja chat template strings) and ``llmkit.reasoning_parsers`` (reasoning parser classes).
llmkit's own parsers and templates are entry points of its distribution, like any plugin's.
A name is ``NAME`` or ``DISTRIBUTION:NAME`` (which distribution's, when several offer it).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from llmkit.errors import PluginError
from llmkit.plugins.checks import check_plugin

TOOL_PARSERS = "llmkit.tool_parsers"
CHAT_TEMPLATES = "llmkit.chat_templates"
REASONING_PARSERS = "llmkit.reasoning_parsers"
GROUPS = (TOOL_PARSERS, CHAT_TEMPLATES, REASONING_PARSERS)


@dataclass(frozen=True)
class Plugin:
    """One entry point: its group, name, target (``module:attr``) and distribution
    (``dist``: its project name; ``distribution``: name and version)."""

    group: str
    name: str
    value: str
    distribution: str
    dist: str = ""

    def describe(self) -> str:
        return f"entry point {self.name} = {self.value} ({self.group}) of {self.distribution}"

    @property
    def qualified_name(self) -> str:
        """``dist:name``: this plugin even when another distribution offers the name too."""
        return f"{self.dist}:{self.name}"


def normalize(dist: str) -> str:
    """A distribution's name as PEP 503 compares them (``Acme_Plugins`` is ``acme-plugins``)."""
    return re.sub(r"[-_.]+", "-", dist).lower()


def _plugin(group: str, ep: EntryPoint) -> Plugin:
    dist = ep.dist
    if dist is None:
        return Plugin(group, ep.name, ep.value, "an unknown package")
    name = dist.metadata["Name"]
    return Plugin(group, ep.name, ep.value, f"{name} {dist.version}", normalize(name))


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


def find(group: str, name: str) -> Plugin | None:
    """The plugin ``name`` (or ``dist:name``) means; None if none is installed.

    Raises PluginError when several distributions offer a bare ``name``.
    """
    dist, sep, bare = name.rpartition(":")
    candidates = installed(group).get(bare if sep else name, [])
    if sep:
        candidates = [p for p in candidates if p.dist == normalize(dist)]
    if len(candidates) > 1:
        raise PluginError(
            f"{group} plugin {name!r} is offered by several distributions ("
            + "; ".join(p.describe() for p in candidates)
            + "); choose one as "
            + " or ".join(repr(p.qualified_name) for p in candidates)
        )
    return candidates[0] if candidates else None


def load(group: str, name: str) -> Any:
    """The object the entry point ``name`` (or ``dist:name``) of ``group`` names, imported
    and checked on first use.

    Raises PluginError when no installed distribution offers ``name``, when several do,
    when importing it fails, or when it is not what the group needs; the message, one
    line, names the entry point, its distribution and the reason.
    """
    return _load(group, name)


@functools.cache
def _load(group: str, name: str) -> Any:
    plugin = find(group, name)
    if plugin is None:
        names = ", ".join(installed(group)) or "none"
        raise PluginError(
            f"no {group} plugin named {name!r} is installed (installed: {names}; "
            "`llmkit plugins` lists them)"
        )
    ep = EntryPoint(plugin.name, plugin.value, group)
    try:
        target = ep.load()
    except Exception as exc:
        raise PluginError(
            _one_line(
                f"plugin {name!r} failed to load: {plugin.describe()}: {type(exc).__name__}: {exc}"
            )
        ) from exc
    problem = check_plugin(group, target, ep.module)
    if problem is not None:
        raise PluginError(
            _one_line(f"plugin {name!r} is not usable: {plugin.describe()}: {problem}")
        )
    return target


def _one_line(message: str) -> str:
    """A message for one log or terminal line (exceptions' own may span several)."""
    return " ".join(message.split())
