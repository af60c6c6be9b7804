"""``llmkit plugins``: the installed tool parsers, chat templates and reasoning parsers."""

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
    """Prints each group's plugins; exits 1 if one fails to load."""
    failed = 0
    for group in GROUPS:
        print(f"{group}:")
        found = installed(group)
        if not found:
            print("  (none)")
        for name, offers in found.items():
            for plugin in offers:
                status = ""
                if not args.no_load:
                    try:
                        load(group, name)
                    except PluginError as exc:
                        failed += 1
                        status = f"  BROKEN: {exc}"
                print(f"  {name:<20} {plugin.value}  [{plugin.distribution}]{status}")
    return 1 if failed else 0
