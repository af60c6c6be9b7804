"""ModelInfo: what a client needs to know of the served model; the core builds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Task = Literal["generate", "embed"]


@dataclass(frozen=True)
class ModelInfo:
    """What a client needs to know of the served model to check and tokenize input."""

    name: str  # the model as configured (a directory, or "demo")
    tokenizer: str  # the tokenizer's directory, loadable with transformers
    task: Task  # what this engine serves
    max_model_len: int
    vocab_size: int
    hidden_size: int
    max_logprobs: int
    is_encoder: bool  # an embedding-only encoder (BERT), which cannot generate
    # Images (LLaVA): the placeholder token, the embeddings one image becomes, the directory
    # of its image processor, and the most images a prompt may hold. None/0: text only.
    image_token_id: int | None = None
    image_tokens: int = 0
    image_processor: str | None = None
    max_images_per_prompt: int = 0
    # The model class, and what a mixture of experts or a windowed model is made of.
    architecture: str = ""
    num_experts: int = 0  # 0: dense
    experts_per_token: int = 0
    sliding_window: int | None = None  # None: no layer is windowed

    @property
    def supports_images(self) -> bool:
        return self.image_token_id is not None

    def too_many_images(self, count: int) -> str | None:
        """Why a prompt may not hold ``count`` images (the limit, or the context they would
        fill), or None if it may."""
        if count > self.max_images_per_prompt:
            return (
                f"the prompt holds {count} images, more than limit_mm_per_prompt allows "
                f"({{'image': {self.max_images_per_prompt}}})"
            )
        if count * self.image_tokens > self.max_model_len:
            return (
                f"the prompt's {count} images take {count * self.image_tokens} tokens "
                f"({self.image_tokens} each), more than max_model_len={self.max_model_len}"
            )
        return None

    @property
    def supports_generate(self) -> bool:
        return self.task == "generate"

    @property
    def supports_embed(self) -> bool:
        return self.task == "embed"
