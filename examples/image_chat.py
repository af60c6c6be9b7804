"""Images in prompts with `LLM.generate` on a tiny random-weight LLaVA (its words are noise).

    python examples/image_chat.py [MODEL_DIR]

Without a model directory it builds the tiny LLaVA the tests use under ~/.cache/llmkit.
A served model takes the same images in chat messages, as OpenAI ``image_url`` parts:
``llmkit serve MODEL_DIR`` and ``{"type": "image_url", "image_url": {"url": "data:..."}}``.
"""

from __future__ import annotations

import sys

from PIL import Image

from llmkit import LLM, SamplingParams
from llmkit.model.demo import default_cache_dir
from llmkit.model.demo_llava import build_llava


def main(model: str | None = None) -> list[str]:
    model = model or str(build_llava(default_cache_dir() / "llava-tiny"))
    llm = LLM(model, max_model_len=512, limit_mm_per_prompt={"image": 2})
    red, blue = Image.new("RGB", (64, 48), "red"), Image.new("RGB", (64, 48), "blue")
    prompts = [
        {
            "prompt": "<|user|>\n<image>\nWhat is in this image?</s>\n<|assistant|>\n",
            "multi_modal_data": {"image": red},
        },
        {
            "prompt": "<|user|>\n<image>\n<image>\nWhich one is blue?</s>\n<|assistant|>\n",
            "multi_modal_data": {"image": [red, blue]},
        },
        {"prompt": "<|user|>\nAnd without a picture?</s>\n<|assistant|>\n"},
    ]
    params = SamplingParams(temperature=0.0, max_tokens=16)
    texts = []
    for prompt, out in zip(prompts, llm.generate(prompts, params, use_tqdm=False)):
        images = prompt.get("multi_modal_data", {}).get("image", [])
        count = len(images) if isinstance(images, list) else 1
        texts.append(out.outputs[0].text)
        print(f"{count} image(s), {len(out.prompt_token_ids)} prompt tokens -> {texts[-1]!r}")
    return texts


if __name__ == "__main__":
    main(*sys.argv[1:])
