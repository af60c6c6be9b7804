"""LLaVA: a CLIP vision tower, a two-layer projector and a Llama-family language model.

An image becomes ``tokens_per_image`` embeddings that take the place of as many image
placeholder tokens in the prompt; from there on generation is the language model's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch
from torch import nn

from llmkit.model import registry
from llmkit.model.context import ForwardContext
from llmkit.model.models.clip import CLIPVisionModel, activation
from llmkit.model.models.llama import LlamaForCausalLM
from llmkit.model.weights import check_all_loaded, copy_weight

if TYPE_CHECKING:
    from transformers import PretrainedConfig

# Checkpoint name prefixes, transformers >= 4.52 and before, -> ours.
_RENAMES = (
    ("model.vision_tower.", "vision_tower."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
    ("model.language_model.", "language_model.model."),
    ("lm_head.", "language_model.lm_head."),
    ("language_model.model.", "language_model.model."),
    ("language_model.lm_head.", "language_model.lm_head."),
)


def feature_layers(cfg: PretrainedConfig) -> list[int]:
    layer = cfg.vision_feature_layer
    return [layer] if isinstance(layer, int) else list(layer)


def tokens_per_image(cfg: PretrainedConfig) -> int:
    """The embeddings one image becomes: a patch each, and the CLS one unless "default" drops it."""
    vision = cfg.vision_config
    patches = (vision.image_size // vision.patch_size) ** 2
    return patches if cfg.vision_feature_select_strategy == "default" else patches + 1


class LlavaMultiModalProjector(nn.Module):
    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        vision, text = cfg.vision_config.hidden_size, cfg.text_config.hidden_size
        bias = bool(getattr(cfg, "multimodal_projector_bias", True))
        self.linear_1 = nn.Linear(vision * len(feature_layers(cfg)), text, bias=bias)
        self.act = activation(cfg.projector_hidden_act)
        self.linear_2 = nn.Linear(text, text, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(self.act(self.linear_1(x)))


class LlavaForConditionalGeneration(nn.Module):
    """Like the language model it wraps, plus :meth:`embed_images` and image rows in forward."""

    # What the engine learns of images through the model registry (model_class).
    tokens_per_image = staticmethod(tokens_per_image)

    def __init__(self, cfg: PretrainedConfig) -> None:
        super().__init__()
        if cfg.vision_config.model_type != "clip_vision_model":
            raise ValueError(
                f"unsupported LLaVA vision tower {cfg.vision_config.model_type!r}; llmkit "
                "supports clip_vision_model"
            )
        text_type = cfg.text_config.model_type
        text_model = registry.by_model_type(text_type, "decoder")
        if text_model is None:
            raise ValueError(
                f"unsupported LLaVA language model {text_type!r}; llmkit supports "
                f"{', '.join(registry.model_types('decoder'))}"
            )
        if cfg.vision_feature_select_strategy not in ("default", "full"):
            raise ValueError(
                "unsupported vision_feature_select_strategy "
                f"{cfg.vision_feature_select_strategy!r}; llmkit supports default and full"
            )
        self.select_default = cfg.vision_feature_select_strategy == "default"
        self.vision_tower = CLIPVisionModel(cfg.vision_config, feature_layers(cfg))
        self.multi_modal_projector = LlavaMultiModalProjector(cfg)
        self.language_model: LlamaForCausalLM = text_model.model_class()(cfg.text_config)
        self.num_layers = self.language_model.num_layers
        self.kv_cache_shapes = self.language_model.kv_cache_shapes
        self.kv_cache_windows = self.language_model.kv_cache_windows
        self._vision_params = {
            name for name, _ in self.named_parameters() if not name.startswith("language_model.")
        }

    def embed_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """``[images, channels, H, W]`` -> ``[images, tokens_per_image, text hidden]``."""
        states = self.vision_tower(pixel_values)
        if self.select_default:
            states = [s[:, 1:] for s in states]
        return self.multi_modal_projector(torch.cat(states, dim=-1))

    def forward(
        self,
        input_ids: torch.Tensor,
        ctx: ForwardContext,
        image_rows: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """``image_rows``: (flat row indices, embeddings) that replace those rows' tokens."""
        x = self.language_model.model.embed_tokens(input_ids)
        if image_rows is not None:
            rows, embeds = image_rows
            x[rows] = embeds.to(x.dtype)
        return self.language_model(input_ids, ctx, inputs_embeds=x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.language_model.compute_logits(hidden)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.named_parameters())
        text_weights: list[tuple[str, torch.Tensor]] = []
        loaded: set[str] = set()
        for raw, tensor in weights:
            name = _rename(raw)
            if name.startswith("language_model."):
                text_weights.append((name.removeprefix("language_model."), tensor))
            elif name in params:
                copy_weight(params, name, tensor)
                loaded.add(name)
            elif not _unused_vision_weight(name, len(self.vision_tower.encoder.layers)):
                raise ValueError(f"unexpected weight {raw!r} in checkpoint")
        self.language_model.load_weights(text_weights)
        vision = {n: p for n, p in params.items() if n in self._vision_params}
        check_all_loaded(vision, loaded)


def _rename(name: str) -> str:
    for old, new in _RENAMES:
        if name.startswith(old):
            name = new + name[len(old) :]
            break
    return name.replace("vision_tower.vision_model.", "vision_tower.")


def _unused_vision_weight(name: str, num_layers: int) -> bool:
    """Layers past the deepest feature layer, and the pooled output's norm, are never run."""
    if name.startswith("vision_tower.post_layernorm."):
        return True
    prefix = "vision_tower.encoder.layers."
    if name.startswith(prefix):
        return int(name[len(prefix) :].split(".")[0]) >= num_layers
    return name == "vision_tower.embeddings.position_ids"
