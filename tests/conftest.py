"""Shared fixtures: tiny random-weight models built locally, once per session."""

from __future__ import annotations

import os

import pytest
import torch

# Without a GPU the Triton kernels run in Triton's interpreter. The variable must be set
# before triton is first imported, which may happen in any test module.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from llmkit.model.demo import ModelSpec, build_model
from llmkit.model.demo_llava import build_llava

# Qwen3's default head_dim is 128; keep every test model small.
SPECS = {
    "llama": ModelSpec(architecture="llama"),
    "mistral": ModelSpec(architecture="mistral", tie_word_embeddings=False),
    "qwen2": ModelSpec(architecture="qwen2"),
    "qwen3": ModelSpec(architecture="qwen3", head_dim=16, num_kv_heads=1),
}


@pytest.fixture(scope="session")
def model_factory(tmp_path_factory):
    """Builds (once) and returns the directory of a tiny model of the given spec."""
    root = tmp_path_factory.mktemp("models")
    built: dict[ModelSpec, str] = {}

    def make(spec: ModelSpec | str = "llama") -> str:
        spec = SPECS[spec] if isinstance(spec, str) else spec
        if spec not in built:
            built[spec] = str(build_model(root / f"m{len(built)}", spec))
        return built[spec]

    return make


@pytest.fixture(scope="session")
def tiny_model(model_factory) -> str:
    """The default tiny Llama: 2 layers, hidden 64, GQA 4:2, tied embeddings."""
    return model_factory("llama")


@pytest.fixture(scope="session")
def llava_model(tmp_path_factory) -> str:
    """A tiny LLaVA: a CLIP vision tower (48x48 images, 36 tokens each) on the tiny Llama."""
    return str(build_llava(tmp_path_factory.mktemp("models") / "llava"))


@pytest.fixture
def fail_next_step(monkeypatch):
    """``arm(engine, error)``: the engine's next model step raises ``error``, once."""

    def arm(engine, error: BaseException) -> None:
        runner = engine._core.runner
        execute = runner.execute

        def fail_once(*args, **kwargs):
            monkeypatch.setattr(runner, "execute", execute)
            raise error

        monkeypatch.setattr(runner, "execute", fail_once)

    return arm
