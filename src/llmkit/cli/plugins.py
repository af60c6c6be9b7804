"""``llmkit plugins``: the installed tool parsers, chat templates and reasoning parsers,
each checked as a server would load it."""

from __future__ import annotations

import argparse

from llmkit.errors import PluginError
from llmkit.plugins import GROUPS, installed, load


def add_parser(commands: argparse._SubParsersAction) -> None:
    plugins = commands.add_parser(
        "plugins", help="list the installed plugins by group, with their distributions"
    )
    plugins.add_argument(
        "--no-load",
        action="store_true",
        help="list the entry points without importing them (a broken plugin is not found out)",
    )
    plugins.set_defaults(handler=plugins_command)


def plugins_command(args: argparse.Namespace) -> int:
    """Prints each group's plugins, each imported and checked; exits 1 if one is unusable.
    A name that several distributions offer is listed with the ``dist:name`` of each."""
    failed = 0
    for group in GROUPS:
        print(f"{group}:")
        found = installed(group)
        if not found:
            print("  (none)")
        for name, offers in found.items():
            for plugin in offers:
                status = ""
                if len(offers) > 1:
                    status = (
                        f"  (also offered by another distribution: use {plugin.qualified_name})"
                    )
                if not args.no_load:
                    try:
                        load(group, plugin.qualified_name if plugin.dist else name)
                    except PluginError as exc:
                        failed += 1
                        status = f"  BROKEN: {exc}"
                print(f"  {name:<20} {plugin.value}  [{plugin.distribution}]{status}")
    return 1 if failed else 0
