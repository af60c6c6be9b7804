"""What kind of model a config describes, as people name it: its architecture, how many experts
it routes among and how many a token uses, its sliding window. Read from the model class's own
per-layer hooks, so it says what the engine runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PretrainedConfig


@dataclass(frozen=True)
class ModelShape:
    architecture: str
    num_experts: int = 0  # 0: dense
    experts_per_token: int = 0
    sliding_window: int | None = None  # keys a windowed layer sees; None: none is windowed
    windowed_layers: int = 0
    num_layers: int = 0
    recurrent_layers: int = 0  # linear attention with a state per sequence (Gated DeltaNet)

    def describe(self) -> str:
        """E.g. ``GptOssForCausalLM, 32 experts (4 a token), window 128 on 12 of 24 layers``."""
        parts = [self.architecture]
        if self.num_experts:
            parts.append(f"{self.num_experts} experts ({self.experts_per_token} a token)")
        if self.sliding_window is not None:
            layers = f"{self.windowed_layers} of {self.num_layers} layers"
            parts.append(f"window {self.sliding_window} on {layers}")
        if self.recurrent_layers:
            layers = f"{self.recurrent_layers} of {self.num_layers} layers"
            parts.append(f"linear attention (Gated DeltaNet) on {layers}")
        return ", ".join(parts)


def model_shape(cls: type[Any], cfg: PretrainedConfig) -> ModelShape:
    """``cls`` (our model class) on ``cfg`` (its text config)."""
    layers = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    attention = getattr(cls, "layer_attention", None)
    windows = [attention(cfg, i).window for i in range(layers)] if attention else []
    windowed = [w for w in windows if w is not None]
    experts = getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None) or 0
    return ModelShape(
        architecture=cls.__name__,
        num_experts=int(experts),
        experts_per_token=int(_per_token(cfg)) if experts else 0,
        sliding_window=max(windowed) if windowed else None,
        windowed_layers=len(windowed),
        num_layers=layers,
        recurrent_layers=list(getattr(cfg, "layer_types", None) or []).count("linear_attention"),
    )


def _per_token(cfg: PretrainedConfig) -> int:
    """How many experts a token uses, under the config's name for it (Gemma 4's own)."""
    return getattr(cfg, "num_experts_per_tok", 0) or getattr(cfg, "top_k_experts", 0) or 0
