"""Builds small random-weight LLaVA models (CLIP vision tower + Llama) for tests and benchmarks.

The directory holds what a HuggingFace LLaVA checkpoint holds: config.json, the weights,
a tokenizer with the ``<image>`` token, the image processor's config and a chat template
that writes ``<image>`` for each image part, so llmkit and transformers both load it.
"""

from __future__ import annotations

import copy
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from llmkit.model.demo import ModelSpec, _tokenizer, build_once

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

IMAGE_TOKEN = "<image>"

# The demo template, with an image part written as the placeholder (as llava-hf's do).
LLAVA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class LlavaSpec:
    """The shape of a generated LLaVA; the same spec always builds the same files."""

    text: ModelSpec = field(default_factory=ModelSpec)
    vision_hidden_size: int = 32
    vision_layers: int = 3
    vision_heads: int = 2
    vision_intermediate_size: int = 64
    image_size: int = 48
    patch_size: int = 8
    vision_feature_layer: int = -2
    vision_feature_select_strategy: Literal["default", "full"] = "default"
    seed: int = 0


def build_llava(path: str | os.PathLike, spec: LlavaSpec = LlavaSpec()) -> Path:
    """Write the LLaVA for ``spec`` to ``path`` unless it is already there; return the path."""
    return build_once(path, asdict(spec), lambda tmp: _write(tmp, spec))


def llava_tokenizer() -> PreTrainedTokenizerFast:
    """The demo tokenizer with ``<image>`` as one special token."""
    from tokenizers import AddedToken

    tokenizer = copy.deepcopy(_tokenizer())
    tokenizer.add_tokens([AddedToken(IMAGE_TOKEN, special=True, normalized=False)])
    tokenizer.chat_template = LLAVA_CHAT_TEMPLATE
    return tokenizer


def _write(root: Path, spec: LlavaSpec) -> None:
    import torch
    import transformers

    tokenizer = llava_tokenizer()
    text = spec.text
    text_config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=text.hidden_size,
        intermediate_size=text.intermediate_size,
        num_hidden_layers=text.num_layers,
        num_attention_heads=text.num_heads,
        num_key_value_heads=text.num_kv_heads,
        max_position_embeddings=text.max_position_embeddings,
        tie_word_embeddings=text.tie_word_embeddings,
        initializer_range=text.initializer_range,
        rope_parameters={"rope_type": "default", "rope_theta": text.rope_theta},
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    vision_config = transformers.CLIPVisionConfig(
        hidden_size=spec.vision_hidden_size,
        intermediate_size=spec.vision_intermediate_size,
        num_hidden_layers=spec.vision_layers,
        num_attention_heads=spec.vision_heads,
        image_size=spec.image_size,
        patch_size=spec.patch_size,
        projection_dim=spec.vision_hidden_size,
    )
    config = transformers.LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=tokenizer.get_vocab()[IMAGE_TOKEN],
        vision_feature_layer=spec.vision_feature_layer,
        vision_feature_select_strategy=spec.vision_feature_select_strategy,
        tie_word_embeddings=text.tie_word_embeddings,
    )
    torch.manual_seed(spec.seed)
    model = transformers.LlavaForConditionalGeneration(config).eval()
    with torch.no_grad():
        # With HF's initialisation every image looks alike to the model; a wider vision
        # tower tells images apart, and a narrow projector keeps their embeddings about as
        # large as the token embeddings, so different images lead to different tokens.
        for name, param in model.named_parameters():
            if "multi_modal_projector" in name or "vision_tower" in name:
                param.normal_(0.0, 0.03 if "projector" in name else 0.5)
    model.save_pretrained(root, safe_serialization=True)
    image_processor = transformers.CLIPImageProcessorPil(
        size={"shortest_edge": spec.image_size},
        crop_size={"height": spec.image_size, "width": spec.image_size},
    )
    processor = transformers.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=spec.patch_size,
        vision_feature_select_strategy=spec.vision_feature_select_strategy,
        num_additional_image_tokens=1,  # CLIP's CLS embedding
        chat_template=LLAVA_CHAT_TEMPLATE,
    )
    processor.save_pretrained(root)
