"""A model path that is not a model directory ends every command with one line, at once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmkit.cli import main

COMMANDS = {
    "serve": ["serve", "{model}"],
    "run": ["run", "{model}", "hello"],
    "engine": ["engine", "{model}", "--socket", "{tmp}/engine.sock"],
    "chat": ["chat", "{model}"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_model_directory_is_one_line(command, tmp_path):
    argv = [a.format(model="/no/such/dir", tmp=tmp_path) for a in COMMANDS[command]]
    with pytest.raises(SystemExit) as failure:
        main(argv)
    assert failure.value.code == (
        "llmkit: error: no model directory at '/no/such/dir'; "
        "give a HuggingFace model directory, a GGUF file, 'smollm2' or 'demo'"
    )


def test_a_directory_without_a_config_is_named(tmp_path):
    with pytest.raises(SystemExit) as failure:
        main(["run", str(tmp_path), "hello"])
    assert failure.value.code == f"llmkit: error: {str(tmp_path)!r} holds no config.json"


def test_the_console_prints_no_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "llmkit.cli", "run", "/no/such/dir", "hello"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "llmkit: error: no model directory at '/no/such/dir'; "
        "give a HuggingFace model directory, a GGUF file, 'smollm2' or 'demo'"
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_that_is_not_gguf_is_one_line(command, tmp_path):
    model = tmp_path / "notes.gguf"
    model.write_text("hello, I am a text file")
    with pytest.raises(SystemExit) as failure:
        main([a.format(model=model, tmp=tmp_path) for a in COMMANDS[command]])
    assert failure.value.code == (
        f"llmkit: error: {model}: not a GGUF file (it does not start with b'GGUF')"
    )
