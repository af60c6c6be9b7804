"""``llmkit demo-model``: write the random-weight demo model to a directory."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser("demo-model", help="build the random-weight demo model")
    demo.add_argument("path", type=Path, help="the directory to write the model to")
    demo.add_argument("--tiny", action="store_true", help="the 2-layer test size instead")
    demo.set_defaults(handler=demo_model_command)


def demo_model_command(args: argparse.Namespace) -> int:
    from llmkit.model.demo import DEMO_SPEC, ModelSpec, build_model

    print(build_model(args.path, ModelSpec() if args.tiny else DEMO_SPEC))
    return 0
