"""Images in prompts, on the caller's side: checked, turned into pixel values by the model's
own image processor, and their placeholders expanded to the tokens the encoder fills."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from llmkit.engine.protocol import ModelInfo
from llmkit.engine.sched.request import ImageInput

_MODALITIES = ("image",)


def split_prompt(prompt: Any) -> tuple[Any, list[Any] | None]:
    """The prompt without its ``multi_modal_data``, and the images that held (None: none)."""
    if not isinstance(prompt, dict) or "multi_modal_data" not in prompt:
        return prompt, None
    data = prompt["multi_modal_data"]
    rest = {k: v for k, v in prompt.items() if k != "multi_modal_data"}
    if data is None:
        return rest, None
    if not isinstance(data, dict):
        raise ValueError(
            f"multi_modal_data must be a dict like {{'image': image}}, got {type(data).__name__}"
        )
    unknown = sorted(set(data) - set(_MODALITIES))
    if unknown:
        raise ValueError(
            f"multi_modal_data has unsupported modality {unknown[0]!r}; llmkit takes "
            f"{', '.join(_MODALITIES)}"
        )
    images = data.get("image")
    if images is None:
        return rest, None
    return rest, list(images) if isinstance(images, (list, tuple)) else [images]


class ImageInputs:
    """One model's image handling; its image processor loads on first use."""

    def __init__(self, info: ModelInfo):
        self.info = info
        self._processor: Any = None

    def check(self, images: Sequence[Any]) -> None:
        """What can be said of the images before reading them: the model takes them, and
        there are not too many."""
        info = self.info
        if not info.supports_images:
            raise ValueError(
                "multi_modal_data: this model is text-only and takes no images; serve a "
                "multimodal model (LLaVA) for image input"
            )
        why = info.too_many_images(len(images))
        if why is not None:
            raise ValueError(f"multi_modal_data: {why}")

    def expand(self, ids: list[int], images: Sequence[Any]) -> tuple[list[int], list[ImageInput]]:
        """``ids`` with each image placeholder repeated ``image_tokens`` times, and the images
        read into pixel values; ``ValueError`` saying what is wrong."""
        info = self.info
        token = info.image_token_id
        found = ids.count(token) if token is not None else 0
        if not images:
            if found:
                raise ValueError(
                    f"the prompt has {found} image placeholder(s) but no image was given in "
                    "multi_modal_data; they must match"
                )
            return ids, []
        self.check(images)
        if found != len(images):
            raise ValueError(
                f"the prompt has {found} image placeholder(s) for {len(images)} image(s) in "
                "multi_modal_data; they must match (one placeholder per image)"
            )
        pixels = [self._pixel_values(i, image) for i, image in enumerate(images)]
        expanded: list[int] = []
        inputs: list[ImageInput] = []
        n = info.image_tokens
        for tid in ids:
            if tid != token:
                expanded.append(tid)
                continue
            values = pixels[len(inputs)]
            digest = hashlib.sha256(values.numpy().tobytes())
            digest.update(repr(tuple(values.shape)).encode())
            inputs.append(ImageInput(len(expanded), n, digest.digest(), values))
            expanded += [tid] * n
        return expanded, inputs

    def _pixel_values(self, index: int, image: Any) -> Any:
        from PIL import Image

        if not isinstance(image, Image.Image):
            raise ValueError(
                f"multi_modal_data['image'][{index}] must be a PIL.Image.Image, got "
                f"{type(image).__name__}"
            )
        if self._processor is None:
            self._processor = load_image_processor(self.info.image_processor or "")
        try:
            image.load()
            batch = self._processor(image.convert("RGB"), return_tensors="pt")
        except (OSError, ValueError, SyntaxError, TypeError) as exc:
            raise ValueError(
                f"multi_modal_data['image'][{index}] cannot be read as an image: {exc}"
            ) from None
        return batch["pixel_values"][0].float().contiguous()


def load_image_processor(path: str) -> Any:
    """The model's own image processor, on its PIL backend: a config that names the
    torchvision one (``CLIPImageProcessorFast``) loads the same processor without it."""
    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(path, backend="pil")
