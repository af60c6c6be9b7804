"""The architecture registry: one entry per architecture, read by the HF loader, the GGUF
reader and the demo builder alike."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import transformers

from llmkit.model import registry
from llmkit.model.demo import ModelSpec
from llmkit.model.loader import model_class
from llmkit.model.models.llama import LlamaForCausalLM


@pytest.mark.parametrize("entry", registry.ARCHITECTURES, ids=lambda a: a.name)
def test_each_entry_names_its_class_and_a_transformers_config(entry):
    cls = entry.model_class()
    assert cls.__name__ == entry.name
    assert getattr(transformers, entry.config_class).model_type == entry.model_type
    if entry.kind == "decoder":  # what the demo builder, LLaVA and LoRA rely on
        assert issubclass(cls, LlamaForCausalLM)
        assert cls.projections


def test_names_and_gguf_names_are_unique():
    names = [a.name for a in registry.ARCHITECTURES]
    gguf = [a.gguf for a in registry.ARCHITECTURES if a.gguf]
    assert len(names) == len(set(names))
    assert len(gguf) == len(set(gguf))


def test_the_loader_finds_a_class_by_architectures_or_by_model_type():
    by_name = SimpleNamespace(architectures=["Unknown", "Qwen3ForCausalLM"], model_type="x")
    assert model_class(by_name).__name__ == "Qwen3ForCausalLM"
    # transformers' GGUF conversion writes no architectures: the first entry of the type.
    assert model_class(SimpleNamespace(model_type="bert")).__name__ == "BertModel"
    with pytest.raises(
        ValueError,
        match="unsupported model architecture Gpt2LMHead; llmkit "
        "supports BertForMaskedLM, BertModel, Gemma3ForCausalLM, Gemma4ForCausalLM, "
        "GptOssForCausalLM, LlamaForCausalLM",
    ):
        model_class(SimpleNamespace(architectures=["Gpt2LMHead"]))


def test_the_gguf_reader_and_the_demo_builder_read_the_same_table():
    assert registry.gguf_names() == [
        "gemma3",
        "gemma4",
        "gpt-oss",
        "llama",
        "qwen2",
        "qwen3",
        "qwen35",
        "qwen35moe",
        "qwen3moe",
    ]
    assert registry.by_gguf("qwen2") is registry.by_model_type("qwen2")
    assert registry.model_types("decoder") == [
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "qwen3_moe",
        "gpt_oss",
        "gemma3_text",
        "gemma4_text",
        "qwen3_5_text",
        "qwen3_5_moe_text",
    ]
    with pytest.raises(ValueError, match="makes no 'bert' model; it makes llama, mistral"):
        ModelSpec(architecture="bert")
