"""Shared fixtures: tiny random-weight models built locally, once per session; the server
processes of servers.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

# Without a GPU the Triton kernels run in Triton's interpreter. The variable must be set
# before triton is first imported, which may happen in any test module.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from llmkit.engine.sched import tiers
from llmkit.model.demo import ModelSpec, build_model
from llmkit.model.demo_llava import build_llava

# The server processes and clients every folder's tests start (servers.py).
pytest_plugins = ["servers"]

# Qwen3's default head_dim is 128; keep every test model small.
SPECS = {
    "llama": ModelSpec(architecture="llama"),
    "mistral": ModelSpec(architecture="mistral", tie_word_embeddings=False),
    "qwen2": ModelSpec(architecture="qwen2"),
    "qwen3": ModelSpec(architecture="qwen3", head_dim=16, num_kv_heads=1),
    "qwen3_moe": ModelSpec(architecture="qwen3_moe", head_dim=16),
    # gpt-oss's own YaRN (truncate off), its original context shorter than the prompts.
    "gpt_oss": ModelSpec(
        architecture="gpt_oss",
        head_dim=16,
        rope_theta=150000.0,
        rope_scaling=(
            ("rope_type", "yarn"),
            ("factor", 32.0),
            ("beta_fast", 32.0),
            ("beta_slow", 1.0),
            ("truncate", False),
            ("original_max_position_embeddings", 64),
        ),
    ),
    # Six layers: llama.cpp's Gemma 3 pattern, five local then one global.
    "gemma3_text": ModelSpec(architecture="gemma3_text", head_dim=16, num_layers=6),
    "gemma4_text": ModelSpec(architecture="gemma4_text", head_dim=16, num_layers=6),
    # Three Gated DeltaNet layers, then gated full attention: one KV cache, three states.
    "qwen3_5_text": ModelSpec(architecture="qwen3_5_text", head_dim=16, num_layers=4),
    "qwen3_5_moe_text": ModelSpec(architecture="qwen3_5_moe_text", head_dim=16, num_layers=4),
}


@pytest.fixture(autouse=True)
def _fresh_prompt_cache():
    """Each test's engines share the process's prompt cache tiers among themselves only:
    the host tier's memory goes with the test."""
    yield
    tiers._STORES.clear()


@pytest.fixture(scope="session")
def model_factory(tmp_path_factory):
    """Builds (once) and returns the directory of a tiny model of the given spec."""
    root = tmp_path_factory.mktemp("models")
    built: dict[ModelSpec, str] = {}

    def make(spec: ModelSpec | str = "llama") -> str:
        if isinstance(spec, str):  # a registry decoder's model_type
            spec = SPECS.get(spec) or ModelSpec(architecture=spec)
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


def build_lora(
    base: str, out: Path, rank: int, targets: list[str] | str, seed: int, **config: Any
) -> str:
    """A PEFT LoRA adapter for ``base`` with random lora_B (PEFT starts it at zero, which
    would leave the model unchanged), saved as PEFT saves one."""
    import peft
    import transformers

    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    lora = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets, **config)
    adapted = peft.get_peft_model(model, lora)
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.1)
    adapted.save_pretrained(out)
    return str(out)


# name -> (rank, target modules, extra LoraConfig fields)
LORAS: dict[str, tuple[int, list[str] | str, dict[str, Any]]] = {
    "attn-r4": (4, ["q_proj", "k_proj", "v_proj", "o_proj"], {}),
    "all-r16": (16, "all-linear", {}),
    # Parts of the fused projections only (q and v, up), with rsLoRA's alpha / sqrt(r).
    "some-r8": (8, ["q_proj", "v_proj", "up_proj", "down_proj"], {"use_rslora": True}),
}


@pytest.fixture(scope="session")
def lora_factory(model_factory, tmp_path_factory):
    """Builds (once) and returns the folder of adapter ``name`` (see LORAS) for a model spec."""
    root = tmp_path_factory.mktemp("loras")
    built: dict[tuple[str, str], str] = {}

    def make(name: str, spec: str = "llama") -> str:
        if (name, spec) not in built:
            rank, targets, extra = LORAS[name]
            out = root / f"{spec}-{name}"
            built[name, spec] = build_lora(
                model_factory(spec), out, rank, targets, len(built), **extra
            )
        return built[name, spec]

    return make


@pytest.fixture(scope="session")
def make_lora():
    """``build_lora`` itself, for adapters a test shapes on its own."""
    return build_lora
