"""`llmkit serve`'s several-models flags, parsed into the manager they describe (no loading)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmkit.cli import build_parser
from llmkit.cli.serve.models import model_manager

GIB = 1 << 30


def manager(*argv: str):
    return model_manager(build_parser().parse_args(["serve", *argv]))


def test_the_single_model_form_makes_no_manager() -> None:
    assert manager("demo") is None


def test_named_models_with_the_engine_flags_and_limits(tiny_model) -> None:
    m = manager(
        "--model", f"chat={tiny_model}", "--model", "toy=demo", "--max-model-len", "64",
        "--keep-alive", "1h30m", "--max-loaded-models", "1", "--models-memory-gib", "2",
    )  # fmt: skip
    assert m.names == ["chat", "toy"]
    assert m.settings("chat").config.max_model_len == 64
    assert (m.keep_alive_s, m.max_loaded_models, m.memory_bytes) == (5400.0, 1, 2 * GIB)


def test_a_models_file_and_a_models_dir(tiny_model, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.gguf").write_bytes(b"GGUF")
    (tmp_path / "dir" / "notes.txt").write_text("not a model")
    models = tmp_path / "models.toml"
    models.write_text(
        f'[defaults]\nmax-model-len = 96\n\n[coder]\nmodel = "{tiny_model}"\npin = true\n'
        f'\n[chat]\nmodel = "{tiny_model}"\nmax_model_len = 48\nkeep_alive = "10m"\n'
    )
    m = manager("--models-file", str(models), "--models-dir", str(tmp_path / "dir"))
    assert m.names == ["a", "coder", "chat"]
    assert m.settings("coder").pin and m.settings("coder").config.max_model_len == 96
    assert m.settings("chat").config.max_model_len == 48
    assert m.settings("chat").keep_alive == "10m"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "nameonly"], "expected NAME=PATH"),
        (["--model", "x=/no/such/file.gguf"], "model 'x': no file or directory"),
        (["--model", "x=demo", "--keep-alive", "soon"], "keep_alive"),
        (["--model", "x=demo", "--max-loaded-models", "0"], "max_loaded_models must be >= 1"),
        (["--model", "x=demo", "--model", "x=demo"], "named twice"),
        (["demo", "--model", "x=demo"], "not both"),
        (["--model", "x=demo", "--served-model-name", "y"], "names each"),
        (["--models-dir", "/no/such/dir"], "not a directory"),
    ],
)
def test_a_bad_flag_stops_the_start_naming_it(argv, message) -> None:
    with pytest.raises(SystemExit, match=message):
        manager(*argv)
