"""Images in prompts: llmkit vs HF `LlavaForConditionalGeneration.generate`, same weights.

    python benchmarks/multimodal.py [--requests 16] [--max-tokens 32]

Builds a small random-weight LLaVA (CLIP tower 112x112 / 14 -> 64 image tokens, 4 layers of
256; Llama 4 layers of 256) and prints (1) time to first token for a one-image prompt, llmkit
vs HF, each the best of several runs, and (2) output tokens/s on a mixed batch, half the
prompts with an image and half text only, llmkit's continuous batching vs HF one prompt at a
time (HF's LLaVA has no batching of prompts with and without images of different lengths).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import transformers
from PIL import Image

from llmkit import LLM, SamplingParams
from llmkit.model.demo import ModelSpec
from llmkit.model.demo_llava import LlavaSpec, build_llava

SPEC = LlavaSpec(
    text=ModelSpec(
        hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=768
    ),
    vision_hidden_size=256,
    vision_layers=4,
    vision_heads=4,
    vision_intermediate_size=768,
    image_size=112,
    patch_size=14,
    vision_feature_layer=-1,
)
IMAGE_PROMPT = "<|user|>\n<image>\nDescribe this picture in a few words.</s>\n<|assistant|>\n"
TEXT_PROMPT = "<|user|>\nTell me a story about a river and a quiet city.</s>\n<|assistant|>\n"


def picture(i: int) -> Image.Image:
    return Image.new("RGB", (160, 120), ((i * 97) % 256, (i * 53) % 256, (i * 31) % 256))


def workload(n: int) -> list[tuple[str, Image.Image | None]]:
    return [(IMAGE_PROMPT, picture(i)) if i % 2 == 0 else (TEXT_PROMPT, None) for i in range(n)]


def best_of(runs: int, fn) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(max(torch.get_num_threads(), 1))
    path = str(build_llava(Path(tempfile.gettempdir()) / "llmkit-bench-llava", SPEC))
    hf = transformers.LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    hf = hf.eval()
    hf.generation_config.eos_token_id = None
    processor = transformers.AutoProcessor.from_pretrained(path)
    # Prefix caching off: a repeated image would otherwise be a cache hit, not a first token.
    llm = LLM(path, max_model_len=1024, enable_prefix_caching=False)
    tokenizer = llm.get_tokenizer()

    def hf_run(text: str, image: Image.Image | None, max_tokens: int) -> None:
        if image is None:
            inputs = processor.tokenizer(text, return_tensors="pt", add_special_tokens=False)
        else:
            inputs = processor(images=image, text=text, return_tensors="pt")
        with torch.inference_mode():
            hf.generate(**inputs, max_new_tokens=max_tokens, do_sample=False, pad_token_id=0)

    def llmkit_prompt(text: str, image: Image.Image | None) -> dict:
        ids = tokenizer.encode(text, add_special_tokens=False)
        prompt: dict = {"prompt_token_ids": ids}
        if image is not None:
            prompt["multi_modal_data"] = {"image": image}
        return prompt

    first = SamplingParams(temperature=0.0, max_tokens=1)
    one = llmkit_prompt(IMAGE_PROMPT, picture(1))
    ttft_hf = best_of(7, lambda: hf_run(IMAGE_PROMPT, picture(1), 1))
    ttft_llmkit = best_of(7, lambda: llm.generate(one, first, use_tqdm=False))
    print(
        f"TTFT, one image ({len(llm.generate(one, first, use_tqdm=False)[0].prompt_token_ids)}"
        " prompt tokens):"
    )
    print(f"  HF generate      {ttft_hf * 1000:8.1f} ms")
    print(f"  llmkit LLM       {ttft_llmkit * 1000:8.1f} ms   ({ttft_hf / ttft_llmkit:.2f}x HF)")

    jobs = workload(args.requests)
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    prompts = [llmkit_prompt(t, i) for t, i in jobs]
    llm.generate(prompts[:2], params, use_tqdm=False)  # warm-up
    t_llmkit = best_of(2, lambda: llm.generate(prompts, params, use_tqdm=False))
    t_hf = best_of(1, lambda: [hf_run(t, i, args.max_tokens) for t, i in jobs])
    tokens = args.requests * args.max_tokens
    print(
        f"Mixed batch: {args.requests} requests ({(args.requests + 1) // 2} with an image), "
        f"{args.max_tokens} output tokens each:"
    )
    print(f"  HF generate      {tokens / t_hf:8.1f} tok/s")
    print(f"  llmkit LLM       {tokens / t_llmkit:8.1f} tok/s   ({t_hf / t_llmkit:.2f}x HF)")


if __name__ == "__main__":
    main()
