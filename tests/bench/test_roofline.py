"""``llmkit bench roofline``: the bytes a decode step reads, and the floor they set."""

from __future__ import annotations

import pytest
from safetensors import safe_open

from llmkit import LLM
from llmkit.bench.roofline import Roofline, decode_reads
from llmkit.cli import main


@pytest.mark.parametrize(("arch", "tied"), [("llama", True), ("mistral", False)])
def test_a_step_reads_every_weight_once_and_the_embedding_only_when_tied(model_factory, arch, tied):
    folder = model_factory(arch)
    llm = LLM(folder, max_model_len=256, max_num_seqs=2)
    runner = llm._core.runner
    model = runner.model
    weights, kv = decode_reads(model, runner.kv_caches)
    with safe_open(f"{folder}/model.safetensors", framework="pt") as f:  # float32, as loaded
        sizes = {name: f.get_tensor(name).numel() * 4 for name in f.keys()}  # noqa: SIM118
    # Tied, the head is the embedding (stored once); untied, a step reads no embedding table.
    assert weights == sum(sizes.values()) - (0 if tied else sizes["model.embed_tokens.weight"])
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    assert kv == 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * 4


def test_the_floor_counts_weights_once_per_step_and_kv_per_stream():
    roof = Roofline(
        "m",
        bandwidth=10e9,
        weight_bytes=100_000_000,
        kv_bytes=50_000,
        context=100,
        measured={1: 50.0},
    )
    assert roof.floor(1) == pytest.approx(10e9 / (100e6 + 5e6))
    assert roof.floor(16) == pytest.approx(16 * 10e9 / (100e6 + 16 * 5e6))
    assert "| 1 | 50.0 | 95.2 | 52% |" in roof.report()


def test_the_command_prints_the_table(tiny_model, capsys):
    argv = ["bench", "roofline", "--model", tiny_model, "--streams", "1", "2", "--output-len", "8"]
    assert main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.endswith("% |")]
    assert [row.split("|")[1].strip() for row in rows] == ["1", "2"]
