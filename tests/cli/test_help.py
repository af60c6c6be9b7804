"""Every option of every `llmkit` command has help; engine flags use EngineConfig's own text."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from collections.abc import Iterator

import pytest

from llmkit.cli import build_parser
from llmkit.config import EngineConfig


def commands(
    parser: argparse.ArgumentParser, path: str = "llmkit"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each command and sub-command's parser, depth first, with its command line."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                yield from commands(sub, f"{path} {name}")


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            yield action


ALL = list(commands(build_parser()))


def test_every_command_is_walked():
    names = {name for name, _ in ALL}
    assert {
        "llmkit serve",
        "llmkit engine",
        "llmkit run",
        "llmkit chat",
        "llmkit demo-model",
        "llmkit bench",
        "llmkit bench throughput",
        "llmkit bench serve",
        "llmkit bench perplexity",
    } <= names


@pytest.mark.parametrize(("name", "parser"), ALL, ids=[name for name, _ in ALL])
def test_every_option_has_a_help_sentence(name, parser):
    missing = [a.option_strings or [a.dest] for a in options(parser) if not (a.help or "").strip()]
    assert not missing, f"{name}: no help for {missing}"


def test_engine_flags_use_the_fields_documentation():
    serve = dict(ALL)["llmkit serve"]
    flags = {a.dest: a.help or "" for a in options(serve)}
    for field in dataclasses.fields(EngineConfig):
        assert field.metadata["help"].strip(), f"EngineConfig.{field.name} is undocumented"
        if field.name != "model":
            assert flags[field.name].startswith(field.metadata["help"])
    assert flags["max_num_seqs"] == (
        "the most sequences in one step (the batch's sequence budget) (default: 256)"
    )


def test_serve_help_prints_the_engine_flags():
    result = subprocess.run(
        [sys.executable, "-m", "llmkit.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = " ".join(result.stdout.split())  # argparse wraps lines
    assert "--max-num-seqs INT the most sequences in one step" in text
    assert "--enable-prefix-caching, --no-enable-prefix-caching reuse the KV cache blocks" in text


def test_bench_serve_without_the_extra_says_what_to_install(monkeypatch):
    monkeypatch.delitem(sys.modules, "llmkit.bench.http_overhead", raising=False)
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    args = build_parser().parse_args(["bench", "http"])
    with pytest.raises(SystemExit, match=r"pip install 'llmkit\[bench\]'"):
        args.handler(args)
