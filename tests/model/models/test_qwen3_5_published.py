"""Qwen3.5/3.6 as published: a vision-language checkpoint (the text model under
``model.language_model``, a vision tower beside it) serves its text model, as transformers'
``*ForConditionalGeneration`` answers text."""

from __future__ import annotations

import pytest
import torch
import transformers
from tests.model.hf_check import assert_answers_as_hf

from llmkit import LLM
from llmkit.model.demo import _tokenizer
from llmkit.model.registry import by_model_type

PROMPTS = [[1, 5, 9, 200, 31], [1, 700, 12, *range(40, 80)]]
VISION = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2}


@pytest.fixture(scope="module", params=["qwen3_5_text", "qwen3_5_moe_text"])
def published(request, tmp_path_factory):
    """The tiny test model's text config inside its family's vision-language config."""
    text_entry = by_model_type(request.param)
    assert text_entry is not None
    text = {
        "vocab_size": len(_tokenizer()),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "initializer_range": 0.1,
        **text_entry.demo,
    }
    vl = "Qwen3_5MoeConfig" if "moe" in request.param else "Qwen3_5Config"
    config = getattr(transformers, vl)(
        text_config=text, vision_config={**VISION, "out_hidden_size": 64}
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForImageTextToText.from_config(config).eval()
    folder = tmp_path_factory.mktemp("published")
    model.save_pretrained(folder)
    _tokenizer().save_pretrained(folder)
    return str(folder), model


def test_a_published_checkpoint_serves_its_text_model(published):
    folder, hf = published
    assert_answers_as_hf(LLM(folder, max_model_len=512), hf, PROMPTS, 8, 2e-3)
