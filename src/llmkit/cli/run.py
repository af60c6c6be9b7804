"""``llmkit run``: stream one completion of a prompt to stdout."""

from __future__ import annotations

import argparse
import sys

from llmkit.cli.flags import add_engine_flags, add_sampling_flags, engine_config, sampling_params


def add_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="stream one completion to stdout")
    run.add_argument("model", help="a model directory, a GGUF file, 'smollm2' or 'demo'")
    run.add_argument("prompt", help="the text to complete")
    add_sampling_flags(run, max_tokens=128)
    # One request at a time: the KV cache then holds one sequence (64 MiB for the demo)
    # rather than the 2 GiB CPU budget.
    add_engine_flags(run, max_num_seqs=1)
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    import anyio

    from llmkit.engine.async_engine import AsyncEngine

    async def run() -> None:
        async with AsyncEngine(engine_config(args.model, args)) as engine:
            async for out in engine.generate(args.prompt, sampling_params(args)):
                for o in out.outputs:
                    sys.stdout.write(o.text)
                sys.stdout.flush()
        sys.stdout.write("\n")

    anyio.run(run)
    return 0
