"""The ``llmkit`` command: serve | engine | run | run-batch | chat | plugins | demo-model |
bench, a module each."""

from __future__ import annotations

import argparse
import logging

from llmkit.cli import bench, chat, demo_model, engine, plugins, run, run_batch, serve

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` (default: ``sys.argv[1:]``) names; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(args, "log_level", "warning").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.handler(args) or 0
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command and its flags."""
    parser = argparse.ArgumentParser(prog="llmkit", description="Serve and run LLMs with llmkit.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (serve, engine, run, run_batch, chat, plugins, demo_model, bench):
        command.add_parser(commands)
    return parser
